#include "export_plan.h"

#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hf_config_dtype.h"
#include "reshard/formats/model_files.h"
#include "reshard/layout/checked.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/lora_merge.h"
#include "reshard/pipelines/peft_adapter.h"

namespace reshard::pipelines_detail {
namespace {

Shape shape_of(const safetensors::TensorSpec& spec) { return safetensors::layout_shape(spec.shape, spec.name); }

bool is_lora_output(const ResolvedTensor& tensor) { return parse_adapter_key(tensor.out.name).has_value(); }

std::vector<std::string> lora_keys(const ResolvedMap& resolved) {
  std::vector<std::string> keys;
  for (const ResolvedTensor& tensor : resolved.outputs) {
    if (is_lora_output(tensor)) keys.push_back(tensor.out.name);
  }
  return keys;
}

// Export writes and merges the plain LoRA factors; any other adapter tensor
// (DoRA magnitudes, lora_B biases, embedding factors, modules_to_save copies)
// would be written as a model tensor or dropped, so it is refused by name.
void refuse_other_peft_outputs(const ResolvedMap& resolved) {
  for (const ResolvedTensor& tensor : resolved.outputs) {
    if (tensor.out.name.starts_with(kPeftKeyPrefix) && !is_lora_output(tensor)) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("the map gives '{}': export handles lora_A/lora_B.weight only (no DoRA magnitudes, "
                              "lora_B biases, embedding factors or whole tensors); merge such an adapter with "
                              "merge-lora",
                              tensor.out.name));
    }
  }
}

// A config whose variant export cannot honour, refused by its field.
void refuse_variants(const LoraConfig& config, std::string_view label) {
  for (const auto& [on, field] : {std::pair{config.use_dora, "use_dora"}, std::pair{config.lora_bias, "lora_bias"},
                                  std::pair{!config.modules_to_save.empty(), "modules_to_save"}}) {
    if (on) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("{}: '{}' is set, which export does not support (merge such an adapter with "
                              "merge-lora)",
                              label, field));
    }
  }
}

// The LoRA config: the options' own, else the checkpoint's metadata key.
std::optional<LoraConfig> lora_config_of(const ExportOptions& options, const ExportConfigs& fallback) {
  if (options.lora_config) return options.lora_config;
  if (!fallback.lora_config) return std::nullopt;
  return parse_lora_config(*fallback.lora_config,
                           fmt::format("{} (metadata '{}')", fallback.label, kLoraConfigMetadataKey));
}

LoraConfig require_lora_config(const ExportOptions& options, const ExportConfigs& fallback, std::string_view why) {
  std::optional<LoraConfig> config = lora_config_of(options, fallback);
  if (!config) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("no LoRA config ({} needs r and lora_alpha): {} has no metadata '{}'", why,
                            fallback.label, kLoraConfigMetadataKey));
  }
  refuse_variants(*config, fmt::format("the LoRA config of {}", fallback.label));
  return *config;
}

// Checks the adapter keys name modules of the base model: --base when given,
// else the export's own non-LoRA outputs.
void check_keys(const ResolvedMap& resolved, const std::vector<std::string>& keys, const ExportOptions& options,
                const ExportConfigs& fallback) {
  if (options.base) {
    const ModelFiles base = open_model_files(*options.base, safetensors::ReadMode::kPread);
    check_adapter_keys(keys, [&](std::string_view name) { return base.catalog.find(name) != nullptr; },
                       fmt::format("the base model {}", options.base->string()));
    return;
  }
  std::set<std::string, std::less<>> names;
  for (const ResolvedTensor& tensor : resolved.outputs) {
    if (!is_lora_output(tensor)) names.insert(tensor.out.name);
  }
  check_adapter_keys(keys, [&](std::string_view name) { return names.contains(name); },
                     fmt::format("the model exported from {} (give --base MODEL_DIR to check against another)",
                                 fallback.label));
}

// Checks a module's factors against the config's rank and its weight.
void check_module(const ResolvedMap& resolved, const ExportMerge& merge, const LoraConfig& config,
                  const ResolvedTensor* weight) {
  const ResolvedTensor& a = resolved.outputs[merge.a];
  const ResolvedTensor& b = resolved.outputs[merge.b];
  const ModuleLora lora = module_lora(config, merge.module);
  const Shape a_shape = shape_of(a.out);
  if (a_shape.empty() || a_shape[0] != lora.r) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("module '{}': the LoRA config gives rank {}, but '{}' has shape [{}]", merge.module, lora.r,
                            a.out.name, fmt::join(a_shape, ", ")));
  }
  if (weight == nullptr) return;
  const LoraDelta delta{{a.source_dtype, a_shape, nullptr}, {b.source_dtype, shape_of(b.out), nullptr},
                        merge.scaling, merge.fan_in_fan_out};
  check_lora_shapes(delta, shape_of(weight->out), weight->source_dtype, merge.module);
}

// Every module's factors, by the weight name they adapt ("<module>.weight").
std::map<std::string, ExportMerge> pair_factors(const ResolvedMap& resolved, const LoraConfig& config) {
  std::map<std::string, ExportMerge> modules;
  std::map<std::string, std::pair<bool, bool>> seen;
  for (size_t i = 0; i < resolved.outputs.size(); ++i) {
    const std::optional<AdapterKey> key = parse_adapter_key(resolved.outputs[i].out.name);
    if (!key) continue;
    ExportMerge& merge = modules[key->module + ".weight"];
    merge.module = key->module;
    auto& [has_a, has_b] = seen[key->module];
    if (key->factor == AdapterKey::Factor::kA) {
      merge.a = i;
      has_a = true;
    } else {
      merge.b = i;
      has_b = true;
    }
  }
  for (auto& [weight, merge] : modules) {
    const auto [has_a, has_b] = seen[merge.module];
    if (!has_a || !has_b) {
      throw Error(ErrorCode::kMissingTensor,
                  fmt::format("module '{}': the map gives '{}' but no '{}'", merge.module,
                              adapter_key(merge.module, has_a ? AdapterKey::Factor::kA : AdapterKey::Factor::kB),
                              adapter_key(merge.module, has_a ? AdapterKey::Factor::kB : AdapterKey::Factor::kA)));
    }
    merge.scaling = module_lora(config, merge.module).scaling;
    merge.fan_in_fan_out = config.fan_in_fan_out;
  }
  return modules;
}

void plan_model(ExportPlan& plan, const ExportOptions& options, const ExportConfigs& fallback) {
  const bool merging = options.kind == ExportKind::kMergedModel;
  refuse_other_peft_outputs(plan.resolved);
  const std::vector<std::string> keys = lora_keys(plan.resolved);
  std::map<std::string, ExportMerge> modules;
  if (merging && !keys.empty()) {
    check_keys(plan.resolved, keys, ExportOptions{}, fallback);
    const LoraConfig config = require_lora_config(options, fallback, "merging");
    modules = pair_factors(plan.resolved, config);
    for (const auto& [weight, merge] : modules) check_module(plan.resolved, merge, config, plan.resolved.find(weight));
  }
  for (size_t i = 0; i < plan.resolved.outputs.size(); ++i) {
    const ResolvedTensor& tensor = plan.resolved.outputs[i];
    if (is_lora_output(tensor)) continue;
    ExportTensor out{i, tensor.out, std::nullopt};
    if (const auto module = modules.find(tensor.out.name); module != modules.end()) {
      out.merge = module->second;
      ++plan.merged;
    }
    plan.tensors.push_back(std::move(out));
  }
  plan.hf_config = options.hf_config_json ? options.hf_config_json : fallback.hf_config;
  plan.generation_config = fallback.generation_config;
  if (plan.hf_config && options.dtype) {
    plan.hf_config = with_config_dtype(*plan.hf_config, *options.dtype,
                                      fmt::format("{} (metadata '{}')", fallback.label, kHfConfigMetadataKey));
  }
}

void plan_adapter(ExportPlan& plan, const ExportOptions& options, const ExportConfigs& fallback) {
  refuse_other_peft_outputs(plan.resolved);
  const std::vector<std::string> keys = lora_keys(plan.resolved);
  if (keys.empty()) {
    throw Error(ErrorCode::kMissingTensor,
                fmt::format("{}: no tensor maps to a LoRA key ('{}<module>.lora_A.weight'): nothing to export as an adapter",
                            fallback.label, kPeftKeyPrefix));
  }
  check_keys(plan.resolved, keys, options, fallback);
  LoraConfig config = require_lora_config(options, fallback, "an adapter");
  for (const auto& [weight, merge] : pair_factors(plan.resolved, config)) {
    check_module(plan.resolved, merge, config, options.base ? nullptr : plan.resolved.find(weight));
  }
  config.target_modules = target_modules_of(keys);
  config.target_modules_regex.reset();
  plan.lora = std::move(config);
  for (size_t i = 0; i < plan.resolved.outputs.size(); ++i) {
    if (is_lora_output(plan.resolved.outputs[i])) plan.tensors.push_back({i, plan.resolved.outputs[i].out, std::nullopt});
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
                       const ExportOptions& options, const ExportConfigs& fallback) {
  ResolveOptions resolve;
  resolve.dtype = options.dtype;
  resolve.allow_unused_rules = options.kind == ExportKind::kAdapterOnly;
  ExportPlan plan;
  plan.kind = options.kind;
  plan.resolved = resolve_tensor_map(map, sources, resolve);
  if (options.kind == ExportKind::kAdapterOnly) {
    plan_adapter(plan, options, fallback);
  } else {
    plan_model(plan, options, fallback);
  }
  return plan;
}

}  // namespace reshard::pipelines_detail
