#include "merge_lora_plan.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "peft_keys.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/lora_merge.h"
#include "reshard/pipelines/peft_adapter.h"

namespace reshard::pipelines_detail {
namespace {

using Entry = TensorCatalog::Entry;
using safetensors::TensorInfo;

Shape shape_of(const TensorInfo& info) { return safetensors::layout_shape(info.shape, info.name); }

// PEFT's own test for a modules_to_save entry: the module path is the entry or ends with ".entry".
bool listed(const std::vector<std::string>& modules, const std::string& module) {
  return std::any_of(modules.begin(), modules.end(), [&](const std::string& m) {
    return module == m || module.ends_with("." + m);
  });
}

[[noreturn]] void unsupported(std::string message) { throw Error(ErrorCode::kUnsupported, std::move(message)); }

void add_whole(MergePlan& plan, const TensorCatalog& base, const Entry& entry, const PeftKey& key,
               const LoraConfig& config, const std::string& base_label) {
  const std::string& name = entry.info->name;
  if (!key.base_layer && !listed(config.modules_to_save, key.module)) {
    unsupported(fmt::format("adapter key '{}' is not a LoRA tensor (lora_A/lora_B.weight, lora_B.bias, "
                            "lora_embedding_A/B, lora_magnitude_vector), and modules_to_save ([{}]) does not list "
                            "its module '{}'",
                            name, fmt::join(config.modules_to_save, ", "), key.module));
  }
  const Entry* target = base.find(key.tensor);
  if (target == nullptr) {
    throw Error(ErrorCode::kMissingTensor,
                fmt::format("adapter key '{}' replaces tensor '{}', which {} does not have", name, key.tensor,
                            base_label));
  }
  if (shape_of(*target->info) != shape_of(*entry.info)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("adapter key '{}' has shape [{}], but the tensor '{}' it replaces is [{}]", name,
                            fmt::join(shape_of(*entry.info), ", "), key.tensor, fmt::join(shape_of(*target->info), ", ")));
  }
  if (!is_castable_float(entry.info->dtype) && entry.info->dtype != target->info->dtype) {
    unsupported(fmt::format("adapter key '{}' is {}, the tensor it replaces {}", name, dtype_name(entry.info->dtype),
                            dtype_name(target->info->dtype)));
  }
  if (!plan.replaced.emplace(key.tensor, &entry).second) {
    throw Error(ErrorCode::kDuplicateTensor, fmt::format("two adapter keys replace tensor '{}'", key.tensor));
  }
}

void add_factor(MergePlan& plan, const TensorCatalog& base, const Entry& entry, const PeftKey& key,
                const std::string& base_label) {
  check_adapter_module(entry.info->name, key.module,
                       [&](std::string_view tensor) { return base.find(tensor) != nullptr; }, base_label);
  MergeModule& module = plan.modules[key.module + ".weight"];
  module.name = key.module;
  const Entry** slot = key.kind == PeftKey::Kind::kA      ? &module.a
                       : key.kind == PeftKey::Kind::kB    ? &module.b
                       : key.kind == PeftKey::Kind::kBBias ? &module.bias
                                                          : &module.magnitude;
  *slot = &entry;
  if (key.kind == PeftKey::Kind::kA || key.kind == PeftKey::Kind::kB) module.embedding = key.embedding;
}

void require_vector(const Entry& entry, int64_t size, const std::string& module, std::string_view what) {
  const Shape shape = shape_of(*entry.info);
  if (shape.size() != 1 || shape[0] != size) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("module '{}': {} '{}' has shape [{}], expected [{}] (one value per output feature)",
                            module, what, entry.info->name, fmt::join(shape, ", "), size));
  }
  if (!is_castable_float(entry.info->dtype)) {
    unsupported(fmt::format("module '{}': '{}' is {}; F32, F16 or BF16 expected", module, entry.info->name,
                            dtype_name(entry.info->dtype)));
  }
}

// The checks PEFT's own merge would fail on (or silently skip), before any byte is written.
void check_module(MergePlan& plan, MergeModule& module, const TensorCatalog& base, const LoraConfig& config) {
  for (const auto& [factor, entry] : {std::pair{"lora_A", module.a}, std::pair{"lora_B", module.b}}) {
    if (entry == nullptr) {
      throw Error(ErrorCode::kMissingTensor,
                  fmt::format("module '{}': the adapter has no {} beside its other tensors", module.name, factor));
    }
  }
  const ModuleLora lora = module_lora(config, module.name);
  const Shape a_shape = shape_of(*module.a->info), b_shape = shape_of(*module.b->info);
  if (a_shape.empty() || a_shape[0] != lora.r) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("module '{}': the config gives rank {}, but '{}' has shape [{}]", module.name, lora.r,
                            module.a->info->name, fmt::join(a_shape, ", ")));
  }
  module.scaling = lora.scaling;
  module.fan_in_fan_out = module.embedding || config.fan_in_fan_out;
  const TensorInfo& w = *base.find(module.name + ".weight")->info;
  const Shape w_shape = shape_of(w);
  check_lora_shapes({{module.a->info->dtype, a_shape, nullptr}, {module.b->info->dtype, b_shape, nullptr},
                     lora.scaling, module.fan_in_fan_out},
                    w_shape, w.dtype, module.name);
  const int64_t out_features = b_shape[0];
  if (config.use_dora && module.magnitude == nullptr) {
    unsupported(fmt::format("module '{}': use_dora is true, but the adapter has no '{}{}.lora_magnitude_vector' "
                            "(a DoRA merge needs the magnitudes)",
                            module.name, kPeftKeyPrefix, module.name));
  }
  if (module.magnitude != nullptr) {
    if (!config.use_dora) {
      unsupported(fmt::format("module '{}': the adapter has '{}' but use_dora is false", module.name,
                              module.magnitude->info->name));
    }
    require_vector(*module.magnitude, out_features, module.name, "lora_magnitude_vector");
  }
  if (module.bias != nullptr) {
    if (!config.lora_bias) {
      unsupported(fmt::format("module '{}': the adapter has '{}' but lora_bias is false", module.name,
                              module.bias->info->name));
    }
    if (module.embedding) unsupported(fmt::format("module '{}': lora_bias on an embedding (PEFT has none)", module.name));
    require_vector(*module.bias, out_features, module.name, "lora_B.bias");
    const std::string bias_name = module.name + ".bias";
    const Entry* base_bias = base.find(bias_name);
    if (base_bias == nullptr) {
      throw Error(ErrorCode::kMissingTensor,
                  fmt::format("module '{}': lora_bias needs the base layer's bias '{}', which the base does not have "
                              "(PEFT cannot merge it either)",
                              module.name, bias_name));
    }
    require_vector(*base_bias, out_features, module.name, "the base bias");
    plan.biases[bias_name] = &module;
  }
}

}  // namespace

MergePlan plan_merge(const TensorCatalog& base, const TensorCatalog& adapter, const LoraConfig& config,
                     const std::string& base_label) {
  MergePlan plan;
  for (const Entry& entry : adapter.tensors()) {
    const std::optional<PeftKey> key = parse_peft_key(entry.info->name);
    if (!key) {
      unsupported(fmt::format("adapter key '{}' is not a PEFT key (it must start with '{}')", entry.info->name,
                              kPeftKeyPrefix));
    }
    if (key->kind == PeftKey::Kind::kWhole) {
      add_whole(plan, base, entry, *key, config, base_label);
    } else {
      add_factor(plan, base, entry, *key, base_label);
    }
  }
  for (auto& [weight, module] : plan.modules) check_module(plan, module, base, config);
  return plan;
}

}  // namespace reshard::pipelines_detail
