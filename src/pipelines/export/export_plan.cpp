#include "pipelines/export/export_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "layout/checked.h"
#include "pipelines/common/hf_config_dtype.h"
#include "pipelines/export/implied_base.h"
#include "pipelines/lora/merge_lora_plan.h"
#include "reshard/formats/model_files.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/peft_adapter.h"

namespace reshard::pipelines_detail {

using layout_detail::checked_add;

namespace {

bool is_adapter_output(const ResolvedTensor& tensor) { return tensor.out.name.starts_with(kPeftKeyPrefix); }

// The map's outputs on one side of the adapter prefix, by index, as the
// merge planner sees them: in the framework's dtype, the one merges run in.
struct Side {
  std::vector<size_t> outputs;
  std::vector<safetensors::TensorSpec> specs;
};

Side side_of(const ResolvedMap& resolved, bool adapter) {
  Side side;
  for (size_t i = 0; i < resolved.outputs.size(); ++i) {
    const ResolvedTensor& tensor = resolved.outputs[i];
    if (is_adapter_output(tensor) != adapter) continue;
    side.outputs.push_back(i);
    side.specs.push_back({tensor.out.name, tensor.source_dtype, tensor.out.shape});
  }
  return side;
}

BaseTensors lookup(const Side& side) {
  return [&side](std::string_view name) -> std::optional<safetensors::TensorSpec> {
    for (const safetensors::TensorSpec& spec : side.specs) {
      if (spec.name == name) return spec;
    }
    return std::nullopt;
  };
}

// The LoRA config: the options' own, else the checkpoint's metadata key.
LoraConfig require_lora_config(const ExportOptions& options, const ExportConfigs& fallback, std::string_view why) {
  if (options.lora_config) return *options.lora_config;
  if (!fallback.lora_config) {
    throw Error(kNoLoraConfig,
                fmt::format("no LoRA config ({} needs r and lora_alpha): {} has no metadata '{}'", why,
                            fallback.label, kLoraConfigMetadataKey));
  }
  return parse_lora_config(*fallback.lora_config,
                           fmt::format("{} (metadata '{}')", fallback.label, kLoraConfigMetadataKey));
}

std::string own_outputs_label(const ExportConfigs& fallback) {
  return fmt::format("the model exported from {} (give --base MODEL_DIR to check against another)", fallback.label);
}

// What the merge planner's adapter indices are as outputs of the map.
ExportMerge merge_of(const MergeModule& module, const Side& adapter) {
  ExportMerge merge;
  merge.module = module.name;
  merge.a = adapter.outputs[module.a];
  merge.b = adapter.outputs[module.b];
  if (module.magnitude) merge.magnitude = adapter.outputs[*module.magnitude];
  merge.scaling = module.scaling;
  merge.fan_in_fan_out = module.fan_in_fan_out;
  return merge;
}

// A model tensor as the adapter changes it: its delta, lora_B's bias, or
// the adapter's whole copy in its place.
ExportTensor merged_tensor(size_t output, const safetensors::TensorSpec& spec, const MergePlan& merges,
                           const Side& adapter) {
  ExportTensor out{output, spec, std::nullopt, std::nullopt};
  if (const auto whole = merges.replaced.find(spec.name); whole != merges.replaced.end()) {
    out.output = adapter.outputs[whole->second];
  }
  if (const auto module = merges.modules.find(spec.name); module != merges.modules.end()) {
    out.merge = merge_of(module->second, adapter);
  }
  if (const auto bias = merges.biases.find(spec.name); bias != merges.biases.end()) {
    out.bias = ExportBiasMerge{adapter.outputs[*bias->second->bias], bias->second->scaling};
  }
  return out;
}

void plan_model(ExportPlan& plan, const ExportOptions& options, const ExportConfigs& fallback) {
  const Side model = side_of(plan.resolved, false);
  const Side adapter = side_of(plan.resolved, true);
  MergePlan merges;
  if (options.kind == ExportKind::kMergedModel && !adapter.specs.empty()) {
    const LoraConfig config = require_lora_config(options, fallback, "merging");
    merges = plan_merge(adapter.specs, lookup(model), config, own_outputs_label(fallback));
  }
  for (const size_t i : model.outputs) {
    plan.tensors.push_back(merged_tensor(i, plan.resolved.outputs[i].out, merges, adapter));
    if (plan.tensors.back().merge) ++plan.merged;
  }
  plan.hf_config = options.hf_config_json ? options.hf_config_json : fallback.hf_config;
  plan.generation_config = fallback.generation_config;
  if (plan.hf_config && options.dtype) {
    plan.hf_config = with_config_dtype(*plan.hf_config, *options.dtype,
                                      fmt::format("{} (metadata '{}')", fallback.label, kHfConfigMetadataKey));
  }
}

void plan_adapter(ExportPlan& plan, const ExportOptions& options, const ExportConfigs& fallback) {
  const Side adapter = side_of(plan.resolved, true);
  if (adapter.specs.empty()) {
    throw Error(ErrorCode::kMissingTensor,
                fmt::format("{}: no tensor maps to a LoRA key ('{}<module>.lora_A.weight'): nothing to export as an adapter",
                            fallback.label, kPeftKeyPrefix));
  }
  LoraConfig config = require_lora_config(options, fallback, "an adapter");
  // The planner's checks are what an adapter needs (its keys, shapes and
  // variants fit the model it will be loaded onto); nothing is merged.
  if (options.base) {
    const ModelFiles base = open_model_files(*options.base, safetensors::ReadMode::kPread);
    plan_merge(adapter.specs, catalog_tensors(base.catalog), config,
               fmt::format("the base model {}", options.base->str()));
  } else {
    const Side model = side_of(plan.resolved, false);
    if (model.specs.empty()) {
      // The source holds LoRA factors alone: checked against the weights they imply, as far as they go.
      plan_merge(adapter.specs, implied_base(adapter.specs, config.fan_in_fan_out), config,
                 fmt::format("the weights {}'s LoRA factors imply (give --base MODEL_DIR to check the modules)",
                             fallback.label));
    } else {
      plan_merge(adapter.specs, lookup(model), config, own_outputs_label(fallback));
    }
  }
  std::vector<std::string> keys;
  for (const safetensors::TensorSpec& spec : adapter.specs) keys.push_back(spec.name);
  config.target_modules = target_modules_of(keys);
  config.target_modules_regex.reset();
  plan.lora = std::move(config);
  for (const size_t i : adapter.outputs) plan.tensors.push_back({i, plan.resolved.outputs[i].out, std::nullopt, std::nullopt});
}

// The base model's tensors as outputs of their own names (cast as the map
// casts), read from sources past the source's own. The source may hold no
// weights of its own beside its LoRA factors: which of two to merge into
// would be a guess.
void add_base_outputs(ResolvedMap& resolved, const MergeBase& base, std::optional<DType> dtype,
                      const ExportConfigs& fallback) {
  const Side own = side_of(resolved, false);
  if (!own.specs.empty()) {
    std::vector<std::string_view> names;
    for (size_t i = 0; i < own.specs.size() && i < 3; ++i) names.push_back(own.specs[i].name);
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} holds base weights itself ('{}'{}): merge into them without a base model, or export "
                            "from a source of LoRA factors alone",
                            fallback.label, fmt::join(names, "', '"), own.specs.size() > names.size() ? ", ..." : ""));
  }
  for (const safetensors::TensorSpec& spec : base.specs) {
    const Shape shape = safetensors::layout_shape(spec);
    ResolvedTensor tensor;
    tensor.out = {spec.name, cast_dtype(spec.dtype, dtype), spec.shape};
    tensor.source_dtype = spec.dtype;
    tensor.regions.push_back(
        {resolved.sources.size(), Box::whole(shape), std::vector<int64_t>(shape.size(), 0), identity_axes(shape)});
    resolved.sources.push_back(spec);
    resolved.outputs.push_back(std::move(tensor));
  }
}

}  // namespace

uint64_t ExportPlan::total_bytes() const {
  uint64_t total = 0;
  for (const ExportTensor& tensor : tensors) {
    total = checked_add(total, dtype_byte_size(tensor.spec.dtype, safetensors::element_count(tensor.spec.shape, tensor.spec.name)),
                        "export size");
  }
  return total;
}

ExportPlan plan_export(std::span<const safetensors::TensorSpec> sources, const TensorMap& map,
                       const ExportOptions& options, const ExportConfigs& fallback, const MergeBase* base) {
  if (base && options.kind != ExportKind::kMergedModel) {
    throw Error(ErrorCode::kInvalidArgument, "a base model's weights are exported only merged with LoRA factors");
  }
  ResolveOptions resolve;
  resolve.dtype = options.dtype;
  // The map's rules for the weights find nothing where the base gives them.
  resolve.allow_unused_rules = options.kind == ExportKind::kAdapterOnly || base != nullptr;
  ExportPlan plan;
  plan.kind = options.kind;
  plan.resolved = resolve_tensor_map(map, sources, resolve);
  if (base) add_base_outputs(plan.resolved, *base, options.dtype, fallback);
  if (options.kind == ExportKind::kAdapterOnly) {
    plan_adapter(plan, options, fallback);
  } else {
    plan_model(plan, options, fallback);
  }
  return plan;
}

}  // namespace reshard::pipelines_detail
