#include "pipelines/export/export_output.h"

#include <fmt/format.h>

#include "formats/atomic_file.h"
#include "formats/hf_folder_writer.h"
#include "pipelines/common/carried_files.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/hf_index.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/lora_config.h"

namespace reshard::pipelines_detail {
namespace {

namespace fs = std::filesystem;

}  // namespace

ExportOutput::ExportOutput(fs::path out, const ExportPlan& plan, uint64_t max_shard_size, bool replace)
    : out_(std::move(out)), plan_(plan), replace_(replace) {
  std::vector<safetensors::TensorSpec> specs;
  for (const ExportTensor& tensor : plan.tensors) specs.push_back(tensor.spec);
  if (plan.kind == ExportKind::kAdapterOnly) {
    files_.emplace_back(std::string(kPeftAdapterFileName), safetensors::FileLayout::plan(specs));
  } else {
    folder_plan_.emplace(HfFolderPlan::plan(specs, max_shard_size));
    for (const HfFolderPlan::File& file : folder_plan_->files()) files_.emplace_back(file.name, file.layout);
  }
  for (size_t f = 0; f < files_.size(); ++f) {
    for (const auto& tensor : files_[f].second.header().tensors()) file_of_tensor_[tensor.name] = f;
  }
}

fs::path ExportOutput::create() {
  staged_.emplace(out_, replace_);
  for (const auto& [name, layout] : files_) {
    writers_.push_back(safetensors::PositionalWriter::create(staged_->staging_path() / name, layout));
  }
  return staged_->staging_path();
}

void ExportOutput::join(const fs::path& staging) {
  for (const auto& [name, layout] : files_) writers_.push_back(safetensors::PositionalWriter::join(staging / name, layout));
}

void ExportOutput::write(const std::string& name, const Box& box, std::span<const std::byte> bytes) const {
  writers_.at(file_of_tensor_.at(name)).write_box(name, box, bytes);
}

void ExportOutput::sync() const {
  for (const auto& writer : writers_) writer.sync();
}

void ExportOutput::commit() {
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
  if (fs::is_directory(out_, ec)) {
    if (plan_.kind == ExportKind::kAdapterOnly) {
      for (const std::string& name : order) {
        if (fs::exists(out_ / name, ec)) stale.push_back(name);
      }
    } else {
      stale = hf_weight_files_in(out_);
    }
  }
  staged_->commit(stale, order);
}

}  // namespace reshard::pipelines_detail
