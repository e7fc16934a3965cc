#include "reshard/pipelines/convert.h"

#include <optional>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "layout/float_convert.h"
#include "pipelines/checkpoint/checkpoint_stream.h"
#include "pipelines/checkpoint/save_plan.h"
#include "pipelines/common/agreement.h"
#include "pipelines/import/convert_configs.h"
#include "pipelines/import/convert_files.h"
#include "pipelines/import/convert_source.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "reshard/storage/open_store.h"

namespace reshard {

using layout_detail::convert_floats;
using pipelines_detail::PlannedChunk;
using pipelines_detail::SaveTensor;

namespace {

namespace fs = std::filesystem;
namespace detail = pipelines_detail;
using detail::ConvertSource;

// The tensors of the new layout: shapes and dtypes of the output, no bytes.
std::vector<SaveTensor> output_tensors(const ConvertSource& source, const ConvertOptions& options) {
  const CheckpointLayout& layout = *options.layout;
  std::vector<SaveTensor> tensors;
  for (const detail::SourceTensor& info : source.tensors()) {
    const Shape shape = safetensors::layout_shape(info.dims, info.name);
    tensors.push_back({info.name, cast_dtype(info.dtype, options.dtype), shape, layout.sharding_for(info.name, shape),
                       layout.topology, std::nullopt});
  }
  return tensors;
}

// Reads a piece of a chunk from the source, cast to the chunk's dtype,
// straight into its staging buffer when no cast is needed.
void read_piece(const ConvertSource& source, const PlannedChunk& chunk, const Box& piece, std::span<std::byte> out) {
  const DType in_dtype = source.tensors()[chunk.array].dtype;
  try {
    if (in_dtype == chunk.dtype) {
      source.read_box(chunk.array, piece, out);
      return;
    }
    std::vector<std::byte> raw(static_cast<size_t>(safetensors::File::box_bytes(in_dtype, piece)));
    source.read_box(chunk.array, piece, raw);
    convert_floats(in_dtype, raw, chunk.dtype, out, static_cast<uint64_t>(piece.volume()));
  } catch (const Error& e) {
    throw e.with_context(fmt::format("tensor '{}' {}", source.tensors()[chunk.array].name, piece.to_string()));
  }
}

// Streams the source into the checkpoint: each process reads the chunks of
// the new layout that it writes, piece by piece, under the staging budget.
ConvertResult convert_to_checkpoint(const ConvertSource& source, const storage::Location& src,
                                    const storage::Location& dst, const ConvertOptions& options,
                                    Transport& transport) {
  if (!options.layout) throw Error(ErrorCode::kInvalidArgument, "a checkpoint output needs a layout (--mesh)");
  std::vector<SaveTensor> tensors;
  detail::Failure failure;
  detail::run_step(failure, [&] { tensors = output_tensors(source, options); });
  const auto reports = detail::exchange_reports(transport, {failure.message, {}});
  detail::require_all_succeeded(reports, transport.rank(), fmt::format("converting to {}", dst.str()), failure.error);
  SaveOptions save;
  save.metadata = source.metadata();
  if (!source.is_checkpoint()) detail::add_folder_configs(save.metadata, src);
  save.replace = options.replace;
  save.staging_bytes = options.staging_bytes;
  save.part_bytes = options.upload.part_bytes;
  save.parts_in_flight = options.upload.parts_in_flight;
  const SaveResult stats = detail::save_checkpoint_streamed(
      dst, tensors, transport, save, [&](const PlannedChunk& chunk, const Box& piece, std::span<std::byte> out) {
        read_piece(source, chunk, piece, out);
        if (options.progress) options.progress(out.size());
      });
  const std::vector<safetensors::TensorSpec> specs = detail::output_specs(source, options.dtype);
  return {checkpoint::Reader::open(dst).manifest().files.size(), specs.size(), detail::total_bytes(specs),
          stats.peak_staged_bytes, {}, {}};
}

}  // namespace

ConvertResult convert_model(const storage::Location& src, const storage::Location& dst, Transport& transport,
                            const ConvertOptions& options) {
  std::optional<ConvertSource> source;
  detail::Failure failure;
  detail::run_step(failure, [&] { source.emplace(ConvertSource::open(src)); });
  const auto reports = detail::exchange_reports(transport, {failure.message, {}});
  if (failure) std::rethrow_exception(failure.error);
  detail::require_all_succeeded(reports, transport.rank(), fmt::format("reading {}", src.str()), nullptr);
  if (options.output == ConvertOutput::kCheckpoint) return convert_to_checkpoint(*source, src, dst, options, transport);
  return detail::convert_to_files(src, dst, options, *source, transport);
}

ConvertOutput convert_output_for(const storage::Location& dst, bool with_layout) {
  if (with_layout) return ConvertOutput::kCheckpoint;
  const std::string name = dst.name();
  constexpr std::string_view kSuffix = ".safetensors";
  if (name.size() <= kSuffix.size() || !name.ends_with(kSuffix)) return ConvertOutput::kHfFolder;
  if (dst.is_local()) {
    std::error_code ec;
    return fs::is_directory(dst.local_path(), ec) ? ConvertOutput::kHfFolder : ConvertOutput::kSafetensorsFile;
  }
  // A prefix with objects under it is a folder.
  return storage::open_store(dst)->list(dst).empty() ? ConvertOutput::kSafetensorsFile : ConvertOutput::kHfFolder;
}

}  // namespace reshard
