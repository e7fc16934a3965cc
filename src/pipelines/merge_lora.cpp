#include "reshard/pipelines/merge_lora.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "hf_config_dtype.h"
#include "small_file.h"
#include "reshard/formats/atomic_file.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/hf_folder_plan.h"
#include "reshard/formats/hf_folder_writer.h"
#include "reshard/formats/model_files.h"
#include "reshard/formats/staged_folder.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/layout/checked.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/lora_merge.h"
#include "reshard/pipelines/peft_adapter.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using safetensors::TensorInfo;

// A tensor's shape as the layout layer counts it (dimensions past 2^63 refused, naming it).
Shape shape_of(const TensorInfo& info) { return safetensors::layout_shape(info.shape, info.name); }

// One adapted weight: its A and B in the adapter, and its scaling.
struct Module {
  std::string name;
  const TensorCatalog::Entry* a = nullptr;
  const TensorCatalog::Entry* b = nullptr;
  float scaling = 0;
};

// Pairs the adapter's A and B per module and checks them against the base
// and the config, so that nothing is written for an adapter that does not fit.
std::map<std::string, Module> plan_modules(const TensorCatalog& base, const TensorCatalog& adapter,
                                           const LoraConfig& config, const std::string& base_label) {
  std::vector<std::string> keys;
  for (const TensorCatalog::Entry& entry : adapter.tensors()) keys.push_back(entry.info->name);
  check_adapter_keys(keys, [&](std::string_view name) { return base.find(name) != nullptr; }, base_label);
  std::map<std::string, Module> modules;  // by weight name
  for (const TensorCatalog::Entry& entry : adapter.tensors()) {
    const AdapterKey key = *parse_adapter_key(entry.info->name);
    Module& module = modules[key.module + ".weight"];
    module.name = key.module;
    (key.factor == AdapterKey::Factor::kA ? module.a : module.b) = &entry;
  }
  for (auto& [weight, module] : modules) {
    for (const auto factor : {AdapterKey::Factor::kA, AdapterKey::Factor::kB}) {
      if ((factor == AdapterKey::Factor::kA ? module.a : module.b) == nullptr) {
        throw Error(ErrorCode::kMissingTensor, fmt::format("the adapter has no '{}' beside its other factor",
                                                           adapter_key(module.name, factor)));
      }
    }
    const ModuleLora lora = module_lora(config, module.name);
    const Shape a_shape = shape_of(*module.a->info);
    const Shape b_shape = shape_of(*module.b->info);
    if (a_shape.empty() || a_shape[0] != lora.r) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("module '{}': the config gives rank {}, but '{}' has shape [{}]", module.name, lora.r,
                              module.a->info->name, fmt::join(a_shape, ", ")));
    }
    module.scaling = lora.scaling;
    const TensorInfo& w = *base.find(weight)->info;
    const LoraFactor a{module.a->info->dtype, a_shape, nullptr};
    const LoraFactor b{module.b->info->dtype, b_shape, nullptr};
    check_lora_shapes({a, b, lora.scaling, config.fan_in_fan_out}, shape_of(w), w.dtype, module.name);
  }
  return modules;
}

std::vector<std::byte> read_whole(const TensorCatalog& catalog, const TensorCatalog::Entry& entry) {
  std::vector<std::byte> bytes(static_cast<size_t>(entry.info->byte_size()));
  catalog.file_of(entry).read(*entry.info, bytes);
  return bytes;
}

// Produces the merged weight block of rows by block of rows.
void produce_merged(const TensorCatalog& base, const TensorCatalog::Entry& w, const TensorCatalog& adapter,
                    const Module& module, bool fan_in_fan_out, DType out_dtype, size_t chunk_bytes,
                    const ByteSink& sink) {
  const std::vector<std::byte> a_bytes = read_whole(adapter, *module.a), b_bytes = read_whole(adapter, *module.b);
  const LoraDelta delta{LoraFactor::in_memory(module.a->info->dtype, shape_of(*module.a->info), a_bytes),
                        LoraFactor::in_memory(module.b->info->dtype, shape_of(*module.b->info), b_bytes),
                        module.scaling, fan_in_fan_out};
  const TensorInfo& info = *w.info;
  const Shape w_shape = shape_of(info);
  const int64_t rows = w_shape[0], cols = w_shape[1];
  const auto w_row = static_cast<size_t>(cols) * static_cast<size_t>(dtype_bits(info.dtype) / 8);
  const auto out_row = static_cast<size_t>(cols) * static_cast<size_t>(dtype_bits(out_dtype) / 8);
  const auto block = static_cast<int64_t>(std::max<size_t>(1, chunk_bytes / std::max<size_t>({w_row, out_row, 1})));
  std::vector<std::byte> in, out;
  for (int64_t row = 0; row < rows; row += block) {
    const int64_t count = std::min(block, rows - row);
    in.resize(static_cast<size_t>(count) * w_row);
    out.resize(static_cast<size_t>(count) * out_row);
    base.file_of(w).read(info, static_cast<uint64_t>(row) * w_row, in);
    merge_lora_box(delta, Box({row, 0}, {count, cols}), info.dtype, in, out_dtype, out);
    sink(out);
  }
}

std::vector<std::string> copy_configs(const fs::path& base, const fs::path& staging, std::optional<DType> dtype) {
  std::vector<std::string> copied;
  std::error_code ec;
  if (!fs::is_directory(base, ec)) return copied;
  for (const char* name : kMergeLoraCopiedFiles) {
    if (!fs::is_regular_file(base / name, ec)) continue;
    std::string text = pipelines_detail::read_small_file(base / name);
    if (dtype && std::string_view(name) == "config.json") text = pipelines_detail::with_torch_dtype(text, *dtype, (base / name).string());
    write_file_atomically(staging / name, text);
    copied.emplace_back(name);
  }
  return copied;
}

HfFolder open_adapter(const fs::path& adapter) {
  if (HfFolder::detect(adapter) != HfFolderKind::kPeftAdapter) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: not a PEFT adapter folder (no {})", adapter.string(), kPeftAdapterFileName));
  }
  return HfFolder::open(adapter, safetensors::ReadMode::kPread);
}

}  // namespace

MergeLoraSummary merge_lora_folder(const fs::path& base_path, const fs::path& adapter_path, const fs::path& out,
                                   const MergeLoraOptions& options) {
  const ModelFiles base = open_model_files(base_path, safetensors::ReadMode::kPread);
  if (base.format == ModelFormat::kPeft) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: is a PEFT adapter; the base must be a model", base_path.string()));
  }
  const HfFolder adapter = open_adapter(adapter_path);
  const fs::path config_path = adapter_path / kPeftConfigFileName;
  const LoraConfig config = parse_lora_config(pipelines_detail::read_small_file(config_path), config_path.string());
  const std::map<std::string, Module> modules =
      plan_modules(base.catalog, adapter.catalog, config, fmt::format("the base model {}", base_path.string()));

  std::vector<safetensors::TensorSpec> specs;
  MergeLoraSummary summary;
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

  const TensorProducer produce = [&](const TensorInfo& tensor, const ByteSink& sink) {
    const ByteSink counted = [&](std::span<const std::byte> bytes) {
      sink(bytes);
      if (options.progress) options.progress(bytes.size());
    };
    const TensorCatalog::Entry& entry = *base.catalog.find(tensor.name);
    const auto module = modules.find(tensor.name);
    if (module == modules.end()) {
      stream_tensor(base.catalog.file_of(entry), *entry.info, tensor.dtype, counted, options.chunk_bytes);
    } else {
      produce_merged(base.catalog, entry, adapter.catalog, module->second, config.fan_in_fan_out, tensor.dtype,
                     options.chunk_bytes, counted);
    }
  };

  StagedFolder staged(out, options.replace);
  summary.copied = copy_configs(base_path, staged.staging_path(), options.dtype);
  write_hf_folder_files(staged.staging_path(), plan, produce);
  std::vector<std::string> order = summary.copied;
  for (const HfFolderPlan::File& file : plan.files()) order.push_back(file.name);
  if (plan.index()) order.emplace_back(kHfIndexFileName);  // last: it makes the folder look complete
  std::vector<std::string> stale;
  std::error_code ec;
  if (fs::is_directory(out, ec)) stale = hf_weight_files_in(out);
  staged.commit(stale, order);

  summary.tensors = specs.size();
  summary.merged = modules.size();
  summary.files = plan.files().size();
  return summary;
}

}  // namespace reshard
