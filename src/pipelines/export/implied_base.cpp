#include "pipelines/export/implied_base.h"

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "pipelines/lora/peft_keys.h"

namespace reshard::pipelines_detail {
namespace {

struct Factors {
  const safetensors::TensorSpec* a = nullptr;
  const safetensors::TensorSpec* b = nullptr;
  bool embedding = false;
};

}  // namespace

BaseTensors implied_base(std::span<const safetensors::TensorSpec> adapter, bool fan_in_fan_out) {
  auto base = std::make_shared<std::map<std::string, safetensors::TensorSpec, std::less<>>>();
  std::map<std::string, Factors> modules;
  for (const safetensors::TensorSpec& spec : adapter) {
    const std::optional<PeftKey> key = parse_peft_key(spec.name);
    if (!key) continue;  // the planner names it
    if (key->kind == PeftKey::Kind::kWhole) {
      base->insert_or_assign(key->tensor, safetensors::TensorSpec{key->tensor, spec.dtype, spec.shape});
    } else if (key->kind == PeftKey::Kind::kA || key->kind == PeftKey::Kind::kB) {
      Factors& factors = modules[key->module];
      (key->kind == PeftKey::Kind::kA ? factors.a : factors.b) = &spec;
      factors.embedding = factors.embedding || key->embedding;
    }
  }
  for (const auto& [module, factors] : modules) {
    // Shapes that do not fit are left to the planner, which says how.
    if (factors.a == nullptr || factors.b == nullptr || factors.a->shape.size() != 2 || factors.b->shape.size() != 2) {
      continue;
    }
    const auto in = factors.a->shape[1];
    const auto out = factors.b->shape[0];
    const bool transposed = fan_in_fan_out || factors.embedding;
    safetensors::TensorSpec weight{module + ".weight", factors.a->dtype, factors.a->shape};
    weight.shape[0] = transposed ? in : out;
    weight.shape[1] = transposed ? out : in;
    base->insert_or_assign(weight.name, weight);
  }
  return [base](std::string_view name) -> std::optional<safetensors::TensorSpec> {
    const auto found = base->find(name);
    if (found == base->end()) return std::nullopt;
    return found->second;
  };
}

}  // namespace reshard::pipelines_detail
