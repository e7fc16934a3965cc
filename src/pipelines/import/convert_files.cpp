#include "pipelines/import/convert_files.h"

#include <algorithm>
#include <memory>
#include <system_error>
#include <unordered_map>

#include <fmt/format.h>

#include "formats/atomic_file.h"
#include "formats/hf_folder_plan.h"
#include "formats/hf_folder_writer.h"
#include "layout/checked.h"
#include "pipelines/common/agreement.h"
#include "pipelines/common/carried_files.h"
#include "pipelines/export/export_objects.h"
#include "pipelines/import/convert_configs.h"
#include "pipelines/import/convert_ranges.h"
#include "reshard/formats/hf_index.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "storage/local/staged_folder.h"

namespace reshard::pipelines_detail {

using formats_detail::hf_weight_files_in;
using formats_detail::HfFolderPlan;
using formats_detail::write_file_atomically;
using layout_detail::checked_add;

namespace {

namespace fs = std::filesystem;

// The output keeps the source's metadata, with "format": "pt" put first
// when it has none: transformers refuses a file whose metadata lacks it.
safetensors::Metadata with_pt_format(const std::optional<safetensors::Metadata>& metadata) {
  const safetensors::Metadata given = metadata.value_or(safetensors::Metadata{});
  const bool has_format = std::any_of(given.begin(), given.end(), [](const auto& entry) { return entry.first == "format"; });
  if (has_format) return given;
  safetensors::Metadata out = {{"format", "pt"}};
  out.insert(out.end(), given.begin(), given.end());
  return out;
}

// A piece of work: a box of a tensor, read by one process and written by it.
struct Piece {
  size_t tensor = 0;
  Box box;
  int process = 0;
};

// Every tensor's pieces, each given to the process with the fewest bytes so far.
std::vector<Piece> assign_pieces(const ConvertSource& source, int processes) {
  std::vector<Piece> pieces;
  std::vector<uint64_t> load(static_cast<size_t>(processes), 0);
  for (size_t t = 0; t < source.tensors().size(); ++t) {
    const SourceTensor& info = source.tensors()[t];
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

// Which process uploads each part of each file: round-robin over the parts
// of the files in order, so that every process gets a share of every size.
std::vector<std::vector<uint32_t>> parts_owned_by(const std::vector<storage::PartLayout>& layouts, int process,
                                                  int processes) {
  std::vector<std::vector<uint32_t>> owned(layouts.size());
  uint64_t next = 0;
  for (size_t f = 0; f < layouts.size(); ++f) {
    for (uint32_t part = 0; part < layouts[f].count(); ++part, ++next) {
      if (next % static_cast<uint64_t>(processes) == static_cast<uint64_t>(process)) owned[f].push_back(part);
    }
  }
  return owned;
}

// Every process calls it; all get rank 0's `text`.
std::string from_rank0(Transport& transport, const std::string& text) {
  const auto all = transport.all_gather(std::as_bytes(std::span(text)));
  return std::string(reinterpret_cast<const char*>(all[0].data()), all[0].size());
}

// Every process calls it; all get every process's `text`, by rank.
std::vector<std::string> from_all(Transport& transport, const std::string& text) {
  std::vector<std::string> texts;
  for (const auto& bytes : transport.all_gather(std::as_bytes(std::span(text)))) {
    texts.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  return texts;
}

// A .safetensors file or a Hugging Face folder, written by every process.
// Local: in a staging folder (or a file's temporary sibling) at final
// offsets, each process writing the pieces it read, committed by process 0.
// In a store: each file one parallel upload whose parts are dealt to the
// processes, each reading what its parts hold; process 0 completes them, then
// writes the configs and the index last (export's protocol, export_objects.h).
class FileOutput {
 public:
  FileOutput(const storage::Location& src, const storage::Location& dst, const ConvertOptions& options,
             const ConvertSource& source, Transport& transport)
      : src_(src), dst_(dst), options_(options), source_(source), transport_(transport) {
    specs_ = output_specs(source, options.dtype);
    const bool rewrite = options.output == ConvertOutput::kSafetensorsFile && source.is_single_safetensors_file();
    const bool folder = options.output != ConvertOutput::kSafetensorsFile;
    const std::optional<safetensors::Metadata> metadata =
        rewrite ? source.metadata()
                : std::optional(with_pt_format(folder ? without_configs(source.metadata()) : source.metadata()));
    if (folder) warnings_ = config_warnings(source, src);
    if (options.output == ConvertOutput::kSafetensorsFile) {
      files_.emplace_back(dst.name(), safetensors::FileLayout::plan(specs_, metadata));
    } else {
      folder_plan_.emplace(HfFolderPlan::plan(specs_, options.max_shard_size, metadata));
      for (const HfFolderPlan::File& file : folder_plan_->files()) files_.emplace_back(file.name, file.layout);
    }
    for (size_t f = 0; f < files_.size(); ++f) {
      for (const auto& tensor : files_[f].second.header().tensors()) file_of_tensor_[tensor.name] = f;
    }
    if (!dst_.is_local()) {
      const storage::Location folder_of_files = folder ? dst_ : dst_.parent();
      objects_ = std::make_unique<ExportObjects>(folder_of_files, files_, options.upload.part_bytes,
                                                         options.replace, options.upload.parts_in_flight, folder);
    }
  }

  ConvertResult run() {
    if (objects_) {
      run_objects();
    } else {
      run_local();
    }
    return {files_.size(), specs_.size(), total_bytes(specs_), 0, carried_, warnings_};
  }

 private:
  std::string what() const { return fmt::format("converting to {}", dst_.str()); }

  void agree(const Failure& failure) {
    const auto reports = exchange_reports(transport_, {failure.message, {}});
    require_all_succeeded(reports, transport_.rank(), what(), failure.error);
  }

  // ---- a local file or folder ----

  void run_local() {
    const int rank = transport_.rank();
    Failure failure;
    if (rank == 0) run_step(failure, [&] { create_local(); });
    agree(failure);
    const fs::path base = from_rank0(transport_, staged_ ? staged_->staging_path().string() : std::string());
    if (rank != 0) {
      run_step(failure, [&] {
        for (const auto& file : files_) writers_.push_back(safetensors::PositionalWriter::join(where(base, file.first), file.second));
      });
    }
    run_step(failure, [&] { write_my_pieces(); });
    agree(failure);
    if (rank == 0) run_step(failure, [&] { commit_local(); });
    agree(failure);
  }

  fs::path where(const fs::path& base, const std::string& name) const {
    return options_.output == ConvertOutput::kSafetensorsFile ? dst_.local_path() : base / name;
  }

  void create_local() {
    if (options_.output == ConvertOutput::kSafetensorsFile) {
      refuse_existing_file();
    } else {
      staged_.emplace(dst_.local_path(), options_.replace);
    }
    const fs::path base = staged_ ? staged_->staging_path() : fs::path();
    for (const auto& file : files_) writers_.push_back(safetensors::PositionalWriter::create(where(base, file.first), file.second));
  }

  void refuse_existing_file() const {
    const fs::path dst = dst_.local_path();
    std::error_code ec;
    if (!fs::exists(dst, ec)) return;
    if (!options_.replace) {
      throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists", dst.string()));
    }
    if (!fs::is_regular_file(dst, ec)) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: exists and is not a file", dst.string()));
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

  // Weights, then configs, then the index: the order the file-by-file
  // fallback of a replaced folder moves them in.
  void commit_local() {
    for (auto& writer : writers_) writer.commit();
    if (!staged_) return;
    const storage::Location staging(staged_->staging_path());
    carried_ = carry_configs(staging);
    if (folder_plan_->index()) {
      write_file_atomically(staging.child(kHfIndexFileName), hf_index_json(*folder_plan_->index()));
    }
    std::vector<std::string> order;
    for (const auto& file : files_) order.push_back(file.first);
    order.insert(order.end(), carried_.begin(), carried_.end());
    if (folder_plan_->index()) order.emplace_back(kHfIndexFileName);  // last: it makes the folder look complete
    staged_->commit(hf_weight_files_in(staged_->final_path()), order);
  }

  std::vector<std::string> carry_configs(const storage::Location& into) const {
    return source_.is_checkpoint() ? write_configs_from_metadata(source_.metadata(), into, options_.dtype, src_)
                                   : carry_model_files(src_, into, options_.dtype);
  }

  // ---- objects in a store ----

  void run_objects() {
    const int rank = transport_.rank();
    Failure failure;
    std::string handles;
    if (rank == 0) {
      run_step(failure, [&] {
        if (folder_plan_ && options_.replace) stale_ = hf_weight_files_in(dst_);  // before any is replaced
        handles = objects_->create();
      });
    }
    agree(failure);
    handles = from_rank0(transport_, handles);
    std::string receipts;
    run_step(failure, [&] {
      if (rank != 0) objects_->join(handles);
      const auto owned = parts_owned_by(objects_->part_layouts(), rank, transport_.size());
      objects_->own(owned);
      write_my_parts(owned);
      receipts = objects_->finish();
    });
    agree(failure);
    const std::vector<std::string> all_receipts = from_all(transport_, receipts);
    if (rank == 0) run_step(failure, [&] { commit_objects(all_receipts); });
    agree(failure);
    objects_->committed();
  }

  void write_my_parts(const std::vector<std::vector<uint32_t>>& owned) {
    std::unordered_map<std::string, size_t> source_index;
    for (size_t t = 0; t < source_.tensors().size(); ++t) source_index[source_.tensors()[t].name] = t;
    for (size_t f = 0; f < files_.size(); ++f) {
      const storage::PartLayout& parts = objects_->part_layouts()[f];
      const FileBytesSink sink = [&](uint64_t offset, std::span<const std::byte> bytes) {
        objects_->write_at(f, offset, bytes);
        if (options_.progress) options_.progress(bytes.size());
      };
      for (const uint32_t part : owned[f]) {
        write_file_range(source_, source_index, files_[f].second, parts.offset(part),
                                 parts.offset(part) + parts.size(part), sink);
      }
    }
  }

  // The uploads complete, then the configs, the index last; then the old
  // folder's weight files the new one lacks go. A failure takes back what
  // appeared in a destination that was empty.
  void commit_objects(const std::vector<std::string>& receipts) {
    try {
      objects_->complete(receipts);
      if (!folder_plan_) return;
      carried_ = carry_configs(dst_);
      if (folder_plan_->index()) objects_->write_small(kHfIndexFileName, hf_index_json(*folder_plan_->index()));
    } catch (...) {
      if (!options_.replace) remove_written();
      throw;
    }
    std::vector<std::string> stale;
    for (const std::string& name : stale_) {
      if (!(name == kHfIndexFileName && folder_plan_->index())) stale.push_back(name);
    }
    objects_->remove_stale(stale);
  }

  void remove_written() noexcept {
    try {
      const std::shared_ptr<storage::Store> store = storage::open_store(dst_);
      if (!folder_plan_) {
        store->remove(dst_);
        return;
      }
      for (const storage::ListEntry& entry : store->list(dst_)) store->remove(dst_.child(entry.name));
    } catch (...) {
      // The store may be what failed: what stays is whole files, never a part.
    }
  }

  storage::Location src_;
  storage::Location dst_;
  const ConvertOptions& options_;
  const ConvertSource& source_;
  Transport& transport_;
  std::vector<safetensors::TensorSpec> specs_;
  OutputFiles files_;  // names relative to the output folder (a lone file: its own name)
  std::optional<HfFolderPlan> folder_plan_;
  std::unordered_map<std::string, size_t> file_of_tensor_;
  std::optional<storage_detail::StagedFolder> staged_;
  std::vector<safetensors::PositionalWriter> writers_;
  std::unique_ptr<ExportObjects> objects_;
  std::vector<std::string> stale_;  // objects: the old folder's weight files, when replacing
  std::vector<std::string> carried_;
  std::vector<std::string> warnings_;
};

}  // namespace

std::vector<safetensors::TensorSpec> output_specs(const ConvertSource& source, std::optional<DType> target) {
  std::vector<safetensors::TensorSpec> specs;
  for (const SourceTensor& tensor : source.tensors()) {
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

ConvertResult convert_to_files(const storage::Location& src, const storage::Location& dst,
                               const ConvertOptions& options, const ConvertSource& source, Transport& transport) {
  return FileOutput(src, dst, options, source, transport).run();
}

}  // namespace reshard::pipelines_detail
