#include "reshard/pipelines/merge_lora.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "formats/hf_folder_plan.h"
#include "formats/hf_folder_writer.h"
#include "formats/output_folder.h"
#include "layout/checked.h"
#include "pipelines/common/carried_files.h"
#include "pipelines/common/small_file.h"
#include "pipelines/lora/merge_lora_plan.h"
#include "pipelines/lora/merge_lora_produce.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/model_files.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/peft_adapter.h"

namespace reshard {

using formats_detail::hf_weight_files_among;
using formats_detail::HfFolderPlan;
using formats_detail::OutputFolder;
using formats_detail::write_hf_index;
using formats_detail::write_hf_weight_files;
using layout_detail::checked_add;

namespace {

namespace detail = pipelines_detail;
using safetensors::TensorInfo;

using detail::MergePlan;

// What transformers needs beside the weights, which a base without it cannot give.
std::vector<std::string> missing_config_warnings(const storage::Location& base, const std::vector<std::string>& carried) {
  if (std::find(carried.begin(), carried.end(), detail::kConfigFileName) != carried.end()) return {};
  return {fmt::format("{} has no config.json, so the merged folder has none either: transformers' from_pretrained "
                      "cannot load it until one is put beside the weights",
                      base.str())};
}

std::vector<safetensors::TensorSpec> specs_of(const TensorCatalog& catalog) {
  std::vector<safetensors::TensorSpec> specs;
  for (const TensorCatalog::Entry& entry : catalog.tensors()) specs.push_back({entry.info->name, entry.info->dtype, entry.info->shape});
  return specs;
}

// 0: every core of the host (merge-lora runs as one process).
int merge_threads(int requested) {
  if (requested < 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("merge-lora: {} threads: must be 0 (every core) or more",
                                                         requested));
  }
  return requested > 0 ? requested : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

HfFolder open_adapter(const storage::Location& adapter) {
  if (HfFolder::detect(adapter) != HfFolderKind::kPeftAdapter) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: not a PEFT adapter folder (no {})", adapter.str(), kPeftAdapterFileName));
  }
  return HfFolder::open(adapter, safetensors::ReadMode::kPread);
}

}  // namespace

MergeLoraResult merge_lora_folder(const storage::Location& base_path, const storage::Location& adapter_path,
                                  const storage::Location& out, const MergeLoraOptions& options) {
  const ModelFiles base = open_model_files(base_path, safetensors::ReadMode::kPread);
  if (base.format == ModelFormat::kPeft) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: is a PEFT adapter; the base must be a model", base_path.str()));
  }
  const HfFolder adapter = open_adapter(adapter_path);
  const storage::Location config_path = adapter_path.child(kPeftConfigFileName);
  const LoraConfig config = parse_lora_config(pipelines_detail::read_small_file(config_path), config_path.str());
  const MergePlan plan_of_merge = detail::plan_merge(specs_of(adapter.catalog), detail::catalog_tensors(base.catalog), config,
                                                     fmt::format("the base model {}", base_path.str()));

  std::vector<safetensors::TensorSpec> specs;
  MergeLoraResult summary;
  for (const TensorCatalog::Entry& entry : base.catalog.tensors()) {
    specs.push_back({entry.info->name, cast_dtype(entry.info->dtype, options.dtype), entry.info->shape});
    summary.bytes = checked_add(summary.bytes, dtype_byte_size(specs.back().dtype,
                                static_cast<uint64_t>(entry.info->elements())), "output size");
  }
  safetensors::Metadata metadata = base.catalog.metadata().value_or(safetensors::Metadata{});
  if (std::none_of(metadata.begin(), metadata.end(), [](const auto& kv) { return kv.first == "format"; })) {
    metadata.insert(metadata.begin(), {"format", "pt"});
  }
  const HfFolderPlan plan = HfFolderPlan::plan(specs, options.max_shard_size, metadata);

  const detail::MergeBlocking blocking{options.block_bytes, merge_threads(options.threads)};
  detail::BlockBuffers buffers;
  const TensorProducer produce = [&](const TensorInfo& tensor, const ByteSink& sink) {
    const ByteSink counted = [&](std::span<const std::byte> bytes) {
      sink(bytes);
      if (options.progress) options.progress(bytes.size());
    };
    // A tensor the adapter holds whole (modules_to_save, a saved base layer) is read from the adapter.
    const auto replaced = plan_of_merge.replaced.find(tensor.name);
    const bool from_adapter = replaced != plan_of_merge.replaced.end();
    const TensorCatalog& catalog = from_adapter ? adapter.catalog : base.catalog;
    const TensorCatalog::Entry& entry =
        from_adapter ? adapter.catalog.tensors()[replaced->second] : *base.catalog.find(tensor.name);
    if (const auto module = plan_of_merge.modules.find(tensor.name); module != plan_of_merge.modules.end()) {
      detail::produce_merged_weight(catalog, entry, adapter.catalog, module->second, tensor.dtype, blocking, buffers,
                                    counted);
    } else if (const auto bias = plan_of_merge.biases.find(tensor.name); bias != plan_of_merge.biases.end()) {
      detail::produce_merged_bias(catalog, entry, adapter.catalog, *bias->second, tensor.dtype, counted);
    } else {
      stream_tensor(catalog.file_of(entry), *entry.info, tensor.dtype, counted, options.block_bytes);
    }
  };

  // Weights, then the carried configs, then the index: in a store, where each
  // file appears as it is written, the folder looks complete only once it is.
  OutputFolder folder(out, options.replace);
  const std::vector<std::string> stale = hf_weight_files_among(folder.files_before());
  write_hf_weight_files(folder, plan, produce, options.upload);
  summary.carried = detail::carry_model_files(base_path, folder.files_at(), options.dtype);
  summary.warnings = missing_config_warnings(base_path, summary.carried);
  write_hf_index(folder, plan);
  std::vector<std::string> order;
  for (const HfFolderPlan::File& file : plan.files()) order.push_back(file.name);
  order.insert(order.end(), summary.carried.begin(), summary.carried.end());
  if (plan.index()) order.emplace_back(kHfIndexFileName);  // last: it makes the folder look complete
  folder.commit(stale, order);

  summary.tensors = specs.size();
  summary.merged = plan_of_merge.modules.size();
  summary.replaced = plan_of_merge.replaced.size();
  summary.files = plan.files().size();
  return summary;
}

}  // namespace reshard
