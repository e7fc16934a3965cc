#include "pipelines/export/export_output.h"

#include <fmt/format.h>

#include "formats/atomic_file.h"
#include "formats/box_bytes.h"
#include "formats/hf_folder_writer.h"
#include "pipelines/common/carried_files.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/hf_index.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/lora_config.h"
#include "reshard/storage/open_store.h"

namespace reshard::pipelines_detail {

using formats_detail::hf_weight_files_in;
using formats_detail::HfFolderPlan;
using formats_detail::write_file_atomically;

namespace {

namespace fs = std::filesystem;

}  // namespace

OutputFiles plan_output_files(const ExportPlan& plan, uint64_t max_shard_size) {
  std::vector<safetensors::TensorSpec> specs;
  for (const ExportTensor& tensor : plan.tensors) specs.push_back(tensor.spec);
  OutputFiles files;
  if (plan.kind == ExportKind::kAdapterOnly) {
    files.emplace_back(std::string(kPeftAdapterFileName), safetensors::FileLayout::plan(specs));
  } else {
    const HfFolderPlan folder = HfFolderPlan::plan(specs, max_shard_size);
    for (const HfFolderPlan::File& file : folder.files()) files.emplace_back(file.name, file.layout);
  }
  return files;
}

ExportOutput::ExportOutput(storage::Location out, const ExportPlan& plan, uint64_t max_shard_size, bool replace,
                           uint64_t part_bytes, uint32_t parts_in_flight)
    : out_(std::move(out)), plan_(plan), replace_(replace) {
  std::vector<safetensors::TensorSpec> specs;
  for (const ExportTensor& tensor : plan.tensors) specs.push_back(tensor.spec);
  if (plan.kind != ExportKind::kAdapterOnly) folder_plan_.emplace(HfFolderPlan::plan(specs, max_shard_size));
  files_ = plan_output_files(plan, max_shard_size);
  for (size_t f = 0; f < files_.size(); ++f) {
    for (const auto& tensor : files_[f].second.header().tensors()) file_of_tensor_[tensor.name] = f;
  }
  if (!out_.is_local()) objects_ = std::make_unique<ExportObjects>(out_, files_, part_bytes, replace, parts_in_flight);
}

std::string ExportOutput::create() {
  if (objects_) return objects_->create();
  staged_.emplace(out_.local_path(), replace_);
  for (const auto& [name, layout] : files_) {
    writers_.push_back(safetensors::PositionalWriter::create(staged_->staging_path() / name, layout));
  }
  return staged_->staging_path().string();
}

void ExportOutput::join(const std::string& created) {
  if (objects_) {
    objects_->join(created);
    return;
  }
  const fs::path staging(created);
  for (const auto& [name, layout] : files_) writers_.push_back(safetensors::PositionalWriter::join(staging / name, layout));
}

void ExportOutput::write(const std::string& name, const Box& box, std::span<const std::byte> bytes) const {
  const size_t file = file_of_tensor_.at(name);
  if (!objects_) {
    writers_.at(file).write_box(name, box, bytes);
    return;
  }
  const safetensors::FileLayout& layout = files_[file].second;
  const safetensors::TensorInfo& tensor = layout.header().at(name);
  const uint64_t base = layout.header().file_offset(tensor);
  formats_detail::for_each_byte_run(tensor, box, [&](const formats_detail::ByteRun& run) {
    objects_->write_at(file, base + run.tensor_offset, bytes.subspan(run.box_offset, run.length));
  });
}

void ExportOutput::sync() const {
  for (const auto& writer : writers_) writer.sync();
}

void ExportOutput::commit() {
  if (objects_) {
    commit_objects();
    return;
  }
  for (auto& writer : writers_) writer.commit();
  const fs::path& staging = staged_->staging_path();
  std::vector<std::string> order;
  if (plan_.kind == ExportKind::kAdapterOnly) {
    write_file_atomically(staging / kPeftConfigFileName, lora_config_json(*plan_.lora));
    order = {std::string(kPeftAdapterFileName), std::string(kPeftConfigFileName)};
  } else {
    if (plan_.hf_config) {
      write_file_atomically(staging / kConfigFileName, *plan_.hf_config);
      order.emplace_back(kConfigFileName);
    }
    if (plan_.generation_config) {
      write_file_atomically(staging / kGenerationConfigFileName, *plan_.generation_config);
      order.emplace_back(kGenerationConfigFileName);
    }
    for (const auto& file : files_) order.push_back(file.first);
    if (folder_plan_->index()) {
      write_file_atomically(staging / kHfIndexFileName, hf_index_json(*folder_plan_->index()));
      order.emplace_back(kHfIndexFileName);  // last: it makes the folder look complete
    }
  }
  std::vector<std::string> stale;
  std::error_code ec;
  const fs::path out = out_.local_path();
  if (fs::is_directory(out, ec)) {
    if (plan_.kind == ExportKind::kAdapterOnly) {
      for (const std::string& name : order) {
        if (fs::exists(out / name, ec)) stale.push_back(name);
      }
    } else {
      stale = hf_weight_files_in(out);
    }
  }
  staged_->commit(stale, order);
}

}  // namespace reshard::pipelines_detail

namespace reshard::pipelines_detail {

// Uploads complete first; the configs next; the index last, as in a local
// folder's move order. A replaced folder then loses the weight files it had
// that the new one has not.
void ExportOutput::commit_objects() {
  const std::shared_ptr<storage::Store> store = storage::open_store(out_);
  std::vector<std::string> before;
  if (replace_) {
    for (const storage::ListEntry& entry : store->list(out_)) before.push_back(entry.name);
  }
  objects_->complete(receipts);
  if (plan_.kind == ExportKind::kAdapterOnly) {
    objects_->write_small(kPeftConfigFileName, lora_config_json(*plan_.lora));
    return;
  }
  if (plan_.hf_config) objects_->write_small(kConfigFileName, *plan_.hf_config);
  if (plan_.generation_config) objects_->write_small(kGenerationConfigFileName, *plan_.generation_config);
  if (folder_plan_->index()) objects_->write_small(kHfIndexFileName, hf_index_json(*folder_plan_->index()));
  std::vector<std::string> stale;
  for (const std::string& name : before) {
    const bool weights = name == kHfSingleFileName || name == kHfIndexFileName ||
                         (name.starts_with("model-") && name.ends_with(".safetensors"));
    if (weights && !(name == kHfIndexFileName && folder_plan_->index())) stale.push_back(name);
  }
  objects_->remove_stale(stale);
}

}  // namespace reshard::pipelines_detail
