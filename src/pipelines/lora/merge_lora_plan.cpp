#include "pipelines/lora/merge_lora_plan.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipelines/lora/merge_box.h"
#include "pipelines/lora/peft_keys.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/peft_adapter.h"

namespace reshard::pipelines_detail {
namespace {

using safetensors::TensorSpec;

Shape shape_of(const TensorSpec& spec) { return safetensors::layout_shape(spec.shape, spec.name); }

// PEFT's own test for a modules_to_save entry: the module path is the entry or ends with ".entry".
bool listed(const std::vector<std::string>& modules, const std::string& module) {
  return std::any_of(modules.begin(), modules.end(), [&](const std::string& m) {
    return module == m || module.ends_with("." + m);
  });
}

[[noreturn]] void unsupported(std::string message) { throw Error(ErrorCode::kUnsupported, std::move(message)); }

void add_whole(MergePlan& plan, const BaseTensors& base, std::span<const TensorSpec> adapter, size_t index,
               const PeftKey& key, const LoraConfig& config, const std::string& base_label) {
  const TensorSpec& entry = adapter[index];
  const std::string& name = entry.name;
  if (!key.base_layer && !listed(config.modules_to_save, key.module)) {
    unsupported(fmt::format("adapter key '{}' is not a LoRA tensor (lora_A/lora_B.weight, lora_B.bias, "
                            "lora_embedding_A/B, lora_magnitude_vector), and modules_to_save ([{}]) does not list "
                            "its module '{}'",
                            name, fmt::join(config.modules_to_save, ", "), key.module));
  }
  const std::optional<TensorSpec> target = base(key.tensor);
  if (!target) {
    throw Error(ErrorCode::kMissingTensor,
                fmt::format("adapter key '{}' replaces tensor '{}', which {} does not have", name, key.tensor,
                            base_label));
  }
  if (shape_of(*target) != shape_of(entry)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("adapter key '{}' has shape [{}], but the tensor '{}' it replaces is [{}]", name,
                            fmt::join(shape_of(entry), ", "), key.tensor, fmt::join(shape_of(*target), ", ")));
  }
  if (entry.dtype != target->dtype && !(is_castable_float(entry.dtype) && is_castable_float(target->dtype))) {
    unsupported(fmt::format("adapter key '{}' is {}, the tensor it replaces {}", name, dtype_name(entry.dtype),
                            dtype_name(target->dtype)));
  }
  if (!plan.replaced.emplace(key.tensor, index).second) {
    throw Error(ErrorCode::kDuplicateTensor, fmt::format("two adapter keys replace tensor '{}'", key.tensor));
  }
}

// A module's factors as they are found; check_module then requires both.
struct Found {
  std::optional<size_t> a, b;
};

void add_factor(MergePlan& plan, std::map<std::string, Found>& found, const BaseTensors& base,
                std::span<const TensorSpec> adapter, size_t index, const PeftKey& key, const std::string& base_label) {
  check_adapter_module(adapter[index].name, key.module,
                       [&](std::string_view tensor) { return base(tensor).has_value(); }, base_label);
  MergeModule& module = plan.modules[key.module + ".weight"];
  module.name = key.module;
  Found& factors = found[key.module];
  std::optional<size_t>* slot = key.kind == PeftKey::Kind::kA      ? &factors.a
                                : key.kind == PeftKey::Kind::kB    ? &factors.b
                                : key.kind == PeftKey::Kind::kBBias ? &module.bias
                                                                   : &module.magnitude;
  *slot = index;
  if (key.kind == PeftKey::Kind::kA || key.kind == PeftKey::Kind::kB) module.embedding = key.embedding;
}

void require_vector(const TensorSpec& entry, int64_t size, const std::string& module, std::string_view what) {
  const Shape shape = shape_of(entry);
  if (shape.size() != 1 || shape[0] != size) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("module '{}': {} '{}' has shape [{}], expected [{}] (one value per output feature)",
                            module, what, entry.name, fmt::join(shape, ", "), size));
  }
  if (!is_castable_float(entry.dtype)) {
    unsupported(fmt::format("module '{}': '{}' is {}; F32, F16 or BF16 expected", module, entry.name,
                            dtype_name(entry.dtype)));
  }
}

// lora_B's bias is added to the base layer's own, which must exist.
void check_bias(MergePlan& plan, const MergeModule& module, const BaseTensors& base, const TensorSpec& bias,
                int64_t out_features, const LoraConfig& config) {
  if (!config.lora_bias) {
    unsupported(fmt::format("module '{}': the adapter has '{}' but lora_bias is false", module.name, bias.name));
  }
  if (module.embedding) unsupported(fmt::format("module '{}': lora_bias on an embedding (PEFT has none)", module.name));
  require_vector(bias, out_features, module.name, "lora_B.bias");
  const std::string bias_name = module.name + ".bias";
  const std::optional<TensorSpec> base_bias = base(bias_name);
  if (!base_bias) {
    throw Error(ErrorCode::kMissingTensor,
                fmt::format("module '{}': lora_bias needs the base layer's bias '{}', which the base does not have "
                            "(PEFT cannot merge it either)",
                            module.name, bias_name));
  }
  require_vector(*base_bias, out_features, module.name, "the base bias");
  plan.biases[bias_name] = &module;
}

// The checks PEFT's own merge would fail on (or silently skip), before any byte is written.
void check_module(MergePlan& plan, MergeModule& module, const Found& found, const BaseTensors& base,
                  std::span<const TensorSpec> adapter, const LoraConfig& config) {
  for (const auto& [factor, index] : {std::pair{"lora_A", found.a}, std::pair{"lora_B", found.b}}) {
    if (!index) {
      throw Error(ErrorCode::kMissingTensor,
                  fmt::format("module '{}': the adapter has no {} beside its other tensors", module.name, factor));
    }
  }
  module.a = *found.a;
  module.b = *found.b;
  const TensorSpec& a = adapter[module.a];
  const TensorSpec& b = adapter[module.b];
  const ModuleLora lora = module_lora(config, module.name);
  const Shape a_shape = shape_of(a), b_shape = shape_of(b);
  if (a_shape.empty() || a_shape[0] != lora.r) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("module '{}': the config gives rank {}, but '{}' has shape [{}]", module.name, lora.r,
                            a.name, fmt::join(a_shape, ", ")));
  }
  module.scaling = lora.scaling;
  module.fan_in_fan_out = module.embedding || config.fan_in_fan_out;
  const TensorSpec w = *base(module.name + ".weight");
  check_lora_shapes({{a.dtype, a_shape, nullptr}, {b.dtype, b_shape, nullptr}, lora.scaling, module.fan_in_fan_out},
                    shape_of(w), w.dtype, module.name);
  const int64_t out_features = b_shape[0];
  if (config.use_dora && !module.magnitude) {
    unsupported(fmt::format("module '{}': use_dora is true, but the adapter has no '{}{}.lora_magnitude_vector' "
                            "(a DoRA merge needs the magnitudes)",
                            module.name, kPeftKeyPrefix, module.name));
  }
  if (module.magnitude) {
    const TensorSpec& magnitude = adapter[*module.magnitude];
    if (!config.use_dora) {
      unsupported(fmt::format("module '{}': the adapter has '{}' but use_dora is false", module.name, magnitude.name));
    }
    require_vector(magnitude, out_features, module.name, "lora_magnitude_vector");
  }
  if (module.bias) check_bias(plan, module, base, adapter[*module.bias], out_features, config);
}

}  // namespace

BaseTensors catalog_tensors(const TensorCatalog& catalog) {
  return [&catalog](std::string_view name) -> std::optional<TensorSpec> {
    const TensorCatalog::Entry* entry = catalog.find(name);
    if (entry == nullptr) return std::nullopt;
    return TensorSpec{entry->info->name, entry->info->dtype, entry->info->shape};
  };
}

MergePlan plan_merge(std::span<const TensorSpec> adapter, const BaseTensors& base, const LoraConfig& config,
                     const std::string& base_label) {
  MergePlan plan;
  std::map<std::string, Found> found;
  for (size_t i = 0; i < adapter.size(); ++i) {
    const std::optional<PeftKey> key = parse_peft_key(adapter[i].name);
    if (!key) {
      unsupported(fmt::format("adapter key '{}' is not a PEFT key (it must start with '{}')", adapter[i].name,
                              kPeftKeyPrefix));
    }
    if (key->kind == PeftKey::Kind::kWhole) {
      add_whole(plan, base, adapter, i, *key, config, base_label);
    } else {
      add_factor(plan, found, base, adapter, i, *key, base_label);
    }
  }
  for (auto& [weight, module] : plan.modules) check_module(plan, module, found[module.name], base, adapter, config);
  return plan;
}

}  // namespace reshard::pipelines_detail
