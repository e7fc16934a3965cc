#include "reshard/pipelines/convert.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <system_error>
#include <unordered_map>

#include <fmt/format.h>

#include "formats/atomic_file.h"
#include "formats/hf_folder_plan.h"
#include "formats/hf_folder_writer.h"
#include "formats/staged_folder.h"
#include "layout/checked.h"
#include "layout/float_convert.h"
#include "pipelines/checkpoint/checkpoint_stream.h"
#include "pipelines/checkpoint/save_plan.h"
#include "pipelines/common/agreement.h"
#include "pipelines/common/carried_files.h"
#include "pipelines/common/hf_config_dtype.h"
#include "pipelines/common/small_file.h"
#include "pipelines/import/tensor_source.h"
#include "reshard/execute/sharded_array.h"
#include "reshard/formats/hf_index.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "reshard/pipelines/export_model.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
namespace detail = pipelines_detail;
using detail::TensorSource;
using detail::kConfigFileName;
using detail::kGenerationConfigFileName;

// The output keeps the source's metadata, with "format": "pt" put first
// when it has none: transformers refuses a file whose metadata lacks it.
safetensors::Metadata with_pt_format(std::optional<safetensors::Metadata> metadata) {
  safetensors::Metadata out = metadata.value_or(safetensors::Metadata{});
  const bool has_format = std::any_of(out.begin(), out.end(), [](const auto& entry) { return entry.first == "format"; });
  if (!has_format) out.insert(out.begin(), {"format", "pt"});
  return out;
}

std::vector<safetensors::TensorSpec> output_specs(const TensorSource& source, std::optional<DType> target) {
  std::vector<safetensors::TensorSpec> specs;
  for (const detail::SourceTensor& tensor : source.tensors()) {
    specs.push_back({tensor.name, cast_dtype(tensor.dtype, target), tensor.dims});
  }
  return specs;
}

uint64_t total_bytes(const std::vector<safetensors::TensorSpec>& specs) {
  uint64_t total = 0;
  for (const auto& spec : specs) {
    total = checked_add(total, dtype_byte_size(spec.dtype, safetensors::element_count(spec.shape, spec.name)), "output size");
  }
  return total;
}

// Reads `box` of a source tensor, cast to `out_dtype`.
std::vector<std::byte> read_cast(const TensorSource& source, size_t tensor, const Box& box, DType out_dtype) {
  const DType in_dtype = source.tensors()[tensor].dtype;
  std::vector<std::byte> raw(static_cast<size_t>(safetensors::File::box_bytes(in_dtype, box)));
  source.read_box(tensor, box, raw);
  if (in_dtype == out_dtype) return raw;
  std::vector<std::byte> cast(static_cast<size_t>(safetensors::File::box_bytes(out_dtype, box)));
  convert_floats(in_dtype, raw, out_dtype, cast, static_cast<uint64_t>(box.volume()));
  return cast;
}

// A piece of work: a box of a tensor, read by one process and written by it.
struct Piece {
  size_t tensor = 0;
  Box box;
  int process = 0;
};

// Every tensor's pieces, each given to the process with the fewest bytes so far.
std::vector<Piece> assign_pieces(const TensorSource& source, int processes) {
  std::vector<Piece> pieces;
  std::vector<uint64_t> load(static_cast<size_t>(processes), 0);
  for (size_t t = 0; t < source.tensors().size(); ++t) {
    const detail::SourceTensor& info = source.tensors()[t];
    const int parts = dtype_bits(info.dtype) % 8 == 0 ? processes : 1;  // sub-byte rows may split bytes
    for (const Box& box : source.pieces(t, parts)) {
      if (box.empty()) continue;
      const auto least = std::min_element(load.begin(), load.end());
      *least += safetensors::File::box_bytes(info.dtype, box);
      pieces.push_back({t, box, static_cast<int>(least - load.begin())});
    }
  }
  return pieces;
}

// ---- the files that travel with the weights ----

// The checkpoint metadata keys that hold a model folder's config files, and their file names.
constexpr std::pair<std::string_view, std::string_view> kConfigKeys[] = {
    {kHfConfigMetadataKey, kConfigFileName}, {kGenerationConfigMetadataKey, kGenerationConfigFileName}};

bool is_config_key(const std::string& key) {
  return std::any_of(std::begin(kConfigKeys), std::end(kConfigKeys), [&](const auto& k) { return key == k.first; });
}

// A folder's weight files get the source's metadata, less the config texts a
// checkpoint keeps there: those become files of their own.
std::optional<safetensors::Metadata> without_configs(std::optional<safetensors::Metadata> metadata) {
  if (!metadata) return metadata;
  std::erase_if(*metadata, [](const auto& entry) { return is_config_key(entry.first); });
  return metadata;
}

std::optional<std::string> metadata_text(const std::optional<safetensors::Metadata>& metadata, std::string_view key) {
  if (!metadata) return std::nullopt;
  for (const auto& [k, v] : *metadata) {
    if (k == key) return v;
  }
  return std::nullopt;
}

// config.json and generation_config.json from a checkpoint's metadata, into `staging`.
std::vector<std::string> write_configs_from_metadata(const std::optional<safetensors::Metadata>& metadata,
                                                     const fs::path& staging, std::optional<DType> dtype,
                                                     const fs::path& src) {
  std::vector<std::string> written;
  for (const auto& [key, name] : kConfigKeys) {
    std::optional<std::string> text = metadata_text(metadata, key);
    if (!text) continue;
    if (name == kConfigFileName && dtype) {
      text = detail::with_config_dtype(*text, *dtype, fmt::format("{} (metadata '{}')", src.string(), key));
    }
    write_file_atomically(staging / name, *text);
    written.emplace_back(name);
  }
  return written;
}

// Whether the folder made from `source` will have a config.json, and if not, why not.
std::vector<std::string> config_warnings(const TensorSource& source, const fs::path& src) {
  std::error_code ec;
  if (source.is_single_safetensors_file()) {
    return {fmt::format("{} is a single .safetensors file: the folder gets no config.json or generation_config.json "
                        "(transformers' from_pretrained needs a config.json beside the weights)",
                        src.string())};
  }
  if (source.is_checkpoint() ? !metadata_text(source.metadata(), kHfConfigMetadataKey).has_value()
                             : !fs::is_regular_file(src / kConfigFileName, ec)) {
    return {fmt::format("{} has no config.json{}: the folder gets none (transformers' from_pretrained needs one)",
                        src.string(), source.is_checkpoint() ? " in its metadata" : "")};
  }
  return {};
}

// ---- file and folder outputs ----

struct PlannedFile {
  fs::path name;  // relative to the output folder (or the output file itself)
  safetensors::FileLayout layout;
};

class FileOutput {
 public:
  FileOutput(const fs::path& src, const fs::path& dst, const ConvertOptions& options, const TensorSource& source,
             Transport& transport)
      : src_(src), dst_(dst), options_(options), source_(source), transport_(transport) {
    specs_ = output_specs(source, options.dtype);
    const bool rewrite = options.output == ConvertOutput::kSafetensorsFile && source.is_single_safetensors_file();
    const bool folder = options.output != ConvertOutput::kSafetensorsFile;
    const std::optional<safetensors::Metadata> metadata =
        rewrite ? source.metadata()
                : std::optional(with_pt_format(folder ? without_configs(source.metadata()) : source.metadata()));
    if (folder) warnings_ = config_warnings(source, src);
    if (options.output == ConvertOutput::kSafetensorsFile) {
      files_.push_back({dst, safetensors::FileLayout::plan(specs_, metadata)});
    } else {
      folder_plan_.emplace(HfFolderPlan::plan(specs_, options.max_shard_size, metadata));
      for (const HfFolderPlan::File& file : folder_plan_->files()) files_.push_back({file.name, file.layout});
    }
    for (size_t f = 0; f < files_.size(); ++f) {
      for (const auto& tensor : files_[f].layout.header().tensors()) file_of_tensor_[tensor.name] = f;
    }
  }

  ConvertResult run() {
    const int rank = transport_.rank();
    const std::string what = fmt::format("converting to {}", dst_.string());
    detail::Failure failure;
    if (rank == 0) detail::run_step(failure, [&] { create(); });
    auto reports = detail::exchange_reports(transport_, {failure.message, {}});
    detail::require_all_succeeded(reports, rank, what, failure.error);
    const fs::path base = shared_base();
    if (rank != 0) {
      detail::run_step(failure, [&] {
        for (const PlannedFile& file : files_) writers_.push_back(safetensors::PositionalWriter::join(where(base, file), file.layout));
      });
    }
    detail::run_step(failure, [&] { write_my_pieces(); });
    reports = detail::exchange_reports(transport_, {failure.message, {}});
    detail::require_all_succeeded(reports, rank, what, failure.error);
    if (rank == 0) detail::run_step(failure, [&] { commit(); });
    reports = detail::exchange_reports(transport_, {failure.message, {}});
    detail::require_all_succeeded(reports, rank, what, failure.error);
    return {files_.size(), specs_.size(), total_bytes(specs_), 0, carried_, warnings_};
  }

 private:
  fs::path where(const fs::path& base, const PlannedFile& file) const {
    return options_.output == ConvertOutput::kSafetensorsFile ? file.name : base / file.name;
  }

  void create() {
    if (options_.output == ConvertOutput::kSafetensorsFile) {
      refuse_existing_file();
    } else {
      staged_.emplace(dst_, options_.replace);
    }
    const fs::path base = staged_ ? staged_->staging_path() : fs::path();
    for (const PlannedFile& file : files_) writers_.push_back(safetensors::PositionalWriter::create(where(base, file), file.layout));
  }

  // The staging folder process 0 made (its name has that process's id).
  fs::path shared_base() {
    const std::string mine = staged_ ? staged_->staging_path().string() : std::string();
    const auto all = transport_.all_gather(std::as_bytes(std::span(mine)));
    return fs::path(std::string(reinterpret_cast<const char*>(all[0].data()), all[0].size()));
  }

  void refuse_existing_file() const {
    std::error_code ec;
    if (!fs::exists(dst_, ec)) return;
    if (!options_.replace) {
      throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists", dst_.string()));
    }
    if (!fs::is_regular_file(dst_, ec)) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: exists and is not a file", dst_.string()));
    }
  }

  void write_my_pieces() {
    for (const Piece& piece : assign_pieces(source_, transport_.size())) {
      if (piece.process != transport_.rank()) continue;
      const safetensors::TensorSpec& spec = specs_[piece.tensor];
      try {
        const std::vector<std::byte> bytes = read_cast(source_, piece.tensor, piece.box, spec.dtype);
        writers_[file_of_tensor_.at(spec.name)].write_box(spec.name, piece.box, bytes);
      } catch (const Error& e) {
        throw e.with_context(fmt::format("tensor '{}' {}", spec.name, piece.box.to_string()));
      }
      if (options_.progress) options_.progress(safetensors::File::box_bytes(spec.dtype, piece.box));
    }
    for (const auto& writer : writers_) writer.sync();
  }

  void commit() {
    for (auto& writer : writers_) writer.commit();
    if (!staged_) return;
    if (folder_plan_->index()) {
      write_file_atomically(staged_->staging_path() / kHfIndexFileName, hf_index_json(*folder_plan_->index()));
    }
    carried_ = source_.is_checkpoint()
                   ? write_configs_from_metadata(source_.metadata(), staged_->staging_path(), options_.dtype, src_)
                   : detail::carry_model_files(src_, staged_->staging_path(), options_.dtype);
    std::vector<std::string> order = carried_;
    for (const PlannedFile& file : files_) order.push_back(file.name.string());
    if (folder_plan_->index()) order.emplace_back(kHfIndexFileName);  // last: it makes the folder look complete
    std::vector<std::string> stale;
    if (fs::is_directory(staged_->final_path())) stale = hf_weight_files_in(staged_->final_path());
    staged_->commit(stale, order);
  }

  fs::path src_;
  fs::path dst_;
  const ConvertOptions& options_;
  const TensorSource& source_;
  Transport& transport_;
  std::vector<safetensors::TensorSpec> specs_;
  std::vector<PlannedFile> files_;
  std::optional<HfFolderPlan> folder_plan_;
  std::unordered_map<std::string, size_t> file_of_tensor_;
  std::optional<StagedFolder> staged_;
  std::vector<safetensors::PositionalWriter> writers_;
  std::vector<std::string> carried_;
  std::vector<std::string> warnings_;
};

// ---- checkpoint output ----

// The tensors of the new layout: shapes and dtypes of the output, no bytes.
std::vector<SaveTensor> output_tensors(const TensorSource& source, const ConvertOptions& options) {
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
void read_piece(const TensorSource& source, const PlannedChunk& chunk, const Box& piece, std::span<std::byte> out) {
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

// A checkpoint made from a folder keeps its config files in its metadata, for
// the folders made from it later (convert, export).
void add_folder_configs(std::optional<safetensors::Metadata>& metadata, const fs::path& src) {
  std::error_code ec;
  if (!fs::is_directory(src, ec)) return;
  for (const auto& [key, name] : kConfigKeys) {
    if (!fs::is_regular_file(src / name, ec) || metadata_text(metadata, key)) continue;
    if (!metadata) metadata.emplace();
    metadata->emplace_back(std::string(key), detail::read_small_file(src / name));
  }
}

// Streams the source into the checkpoint: each process reads the chunks of
// the new layout that it writes, piece by piece, under the staging budget.
ConvertResult convert_to_checkpoint(const TensorSource& source, const fs::path& src, const fs::path& dst,
                                    const ConvertOptions& options, Transport& transport) {
  if (!options.layout) throw Error(ErrorCode::kInvalidArgument, "a checkpoint output needs a layout (--mesh)");
  std::vector<SaveTensor> tensors;
  detail::Failure failure;
  detail::run_step(failure, [&] { tensors = output_tensors(source, options); });
  const auto reports = detail::exchange_reports(transport, {failure.message, {}});
  detail::require_all_succeeded(reports, transport.rank(), fmt::format("converting to {}", dst.string()), failure.error);
  SaveOptions save;
  save.metadata = source.metadata();
  if (!source.is_checkpoint()) add_folder_configs(save.metadata, src);
  save.replace = options.replace;
  save.staging_bytes = options.staging_bytes;
  const SaveResult stats = detail::save_checkpoint_streamed(
      dst, tensors, transport, save, [&](const PlannedChunk& chunk, const Box& piece, std::span<std::byte> out) {
        read_piece(source, chunk, piece, out);
        if (options.progress) options.progress(out.size());
      });
  const std::vector<safetensors::TensorSpec> specs = output_specs(source, options.dtype);
  return {checkpoint::Reader::open(dst).manifest().files.size(), specs.size(), total_bytes(specs),
          stats.peak_staged_bytes, {}, {}};
}

}  // namespace

ConvertResult convert_model(const fs::path& src, const fs::path& dst, Transport& transport,
                            const ConvertOptions& options) {
  std::optional<TensorSource> source;
  detail::Failure failure;
  detail::run_step(failure, [&] { source.emplace(TensorSource::open(src)); });
  const auto reports = detail::exchange_reports(transport, {failure.message, {}});
  if (failure) std::rethrow_exception(failure.error);
  detail::require_all_succeeded(reports, transport.rank(), fmt::format("reading {}", src.string()), nullptr);
  if (options.output == ConvertOutput::kCheckpoint) return convert_to_checkpoint(*source, src, dst, options, transport);
  return FileOutput(src, dst, options, *source, transport).run();
}

ConvertOutput convert_output_for(const fs::path& dst, bool with_layout) {
  if (with_layout) return ConvertOutput::kCheckpoint;
  std::error_code ec;
  if (dst.extension() == ".safetensors" && !fs::is_directory(dst, ec)) return ConvertOutput::kSafetensorsFile;
  return ConvertOutput::kHfFolder;
}

}  // namespace reshard
