// The built-in maps. Each is a map file's text, so a preset reads exactly as
// a user's file would (docs/tensor-map.md describes both).
#include <string>
#include <string_view>
#include <vector>

#include "reshard/pipelines/tensor_map.h"

namespace reshard {
namespace {

// A Levanter-style Llama: scanned layers stacked on a leading `layer` axis,
// attention weights with separate head axes (q as [layer, kv_heads,
// q_per_group, head_dim, embed], as hf-peft.md describes), linear weights
// [out, in], and LoRA factors A as [layer, r, in...] and B as [layer, out..., r]
// beside the weight they adapt (`<module>.lora.lora_A.weight`).
constexpr std::string_view kLevanterLlama = R"json({
  "description": "Levanter-style Llama (stacked layers, separate head axes, LoRA A [layer, r, in], B [layer, out, r]) to Hugging Face / PEFT names",
  "rules": [
    {"from": "embeddings.token_embeddings.weight", "to": "model.embed_tokens.weight"},
    {"from": "transformer.layers.stacked.self_attn.q_proj.weight", "to": "model.layers.{layer}.self_attn.q_proj.weight", "rearrange": "layer kv_heads q_per_group head_dim embed -> (kv_heads q_per_group head_dim) embed"},
    {"from": "transformer.layers.stacked.self_attn.k_proj.weight", "to": "model.layers.{layer}.self_attn.k_proj.weight", "rearrange": "layer kv_heads head_dim embed -> (kv_heads head_dim) embed"},
    {"from": "transformer.layers.stacked.self_attn.v_proj.weight", "to": "model.layers.{layer}.self_attn.v_proj.weight", "rearrange": "layer kv_heads head_dim embed -> (kv_heads head_dim) embed"},
    {"from": "transformer.layers.stacked.self_attn.o_proj.weight", "to": "model.layers.{layer}.self_attn.o_proj.weight", "rearrange": "layer embed heads head_dim -> embed (heads head_dim)"},
    {"from": "transformer.layers.stacked.mlp.gate_proj.weight", "to": "model.layers.{layer}.mlp.gate_proj.weight", "rearrange": "layer mlp embed -> mlp embed"},
    {"from": "transformer.layers.stacked.mlp.up_proj.weight", "to": "model.layers.{layer}.mlp.up_proj.weight", "rearrange": "layer mlp embed -> mlp embed"},
    {"from": "transformer.layers.stacked.mlp.down_proj.weight", "to": "model.layers.{layer}.mlp.down_proj.weight", "rearrange": "layer embed mlp -> embed mlp"},
    {"from": "transformer.layers.stacked.input_layernorm.weight", "to": "model.layers.{layer}.input_layernorm.weight", "rearrange": "layer embed -> embed"},
    {"from": "transformer.layers.stacked.post_attention_layernorm.weight", "to": "model.layers.{layer}.post_attention_layernorm.weight", "rearrange": "layer embed -> embed"},
    {"from": "transformer.norm.weight", "to": "model.norm.weight"},
    {"from": "lm_head.weight", "to": "lm_head.weight", "optional": true},
    {"from": "transformer.layers.stacked.self_attn.q_proj.lora.lora_A.weight", "to": "base_model.model.model.layers.{layer}.self_attn.q_proj.lora_A.weight", "rearrange": "layer r embed -> r embed", "optional": true},
    {"from": "transformer.layers.stacked.self_attn.q_proj.lora.lora_B.weight", "to": "base_model.model.model.layers.{layer}.self_attn.q_proj.lora_B.weight", "rearrange": "layer kv_heads q_per_group head_dim r -> (kv_heads q_per_group head_dim) r", "optional": true},
    {"from": "transformer.layers.stacked.self_attn.k_proj.lora.lora_A.weight", "to": "base_model.model.model.layers.{layer}.self_attn.k_proj.lora_A.weight", "rearrange": "layer r embed -> r embed", "optional": true},
    {"from": "transformer.layers.stacked.self_attn.k_proj.lora.lora_B.weight", "to": "base_model.model.model.layers.{layer}.self_attn.k_proj.lora_B.weight", "rearrange": "layer kv_heads head_dim r -> (kv_heads head_dim) r", "optional": true},
    {"from": "transformer.layers.stacked.self_attn.v_proj.lora.lora_A.weight", "to": "base_model.model.model.layers.{layer}.self_attn.v_proj.lora_A.weight", "rearrange": "layer r embed -> r embed", "optional": true},
    {"from": "transformer.layers.stacked.self_attn.v_proj.lora.lora_B.weight", "to": "base_model.model.model.layers.{layer}.self_attn.v_proj.lora_B.weight", "rearrange": "layer kv_heads head_dim r -> (kv_heads head_dim) r", "optional": true},
    {"from": "transformer.layers.stacked.self_attn.o_proj.lora.lora_A.weight", "to": "base_model.model.model.layers.{layer}.self_attn.o_proj.lora_A.weight", "rearrange": "layer r heads head_dim -> r (heads head_dim)", "optional": true},
    {"from": "transformer.layers.stacked.self_attn.o_proj.lora.lora_B.weight", "to": "base_model.model.model.layers.{layer}.self_attn.o_proj.lora_B.weight", "rearrange": "layer embed r -> embed r", "optional": true},
    {"from": "transformer.layers.stacked.mlp.gate_proj.lora.lora_A.weight", "to": "base_model.model.model.layers.{layer}.mlp.gate_proj.lora_A.weight", "rearrange": "layer r embed -> r embed", "optional": true},
    {"from": "transformer.layers.stacked.mlp.gate_proj.lora.lora_B.weight", "to": "base_model.model.model.layers.{layer}.mlp.gate_proj.lora_B.weight", "rearrange": "layer mlp r -> mlp r", "optional": true},
    {"from": "transformer.layers.stacked.mlp.up_proj.lora.lora_A.weight", "to": "base_model.model.model.layers.{layer}.mlp.up_proj.lora_A.weight", "rearrange": "layer r embed -> r embed", "optional": true},
    {"from": "transformer.layers.stacked.mlp.up_proj.lora.lora_B.weight", "to": "base_model.model.model.layers.{layer}.mlp.up_proj.lora_B.weight", "rearrange": "layer mlp r -> mlp r", "optional": true},
    {"from": "transformer.layers.stacked.mlp.down_proj.lora.lora_A.weight", "to": "base_model.model.model.layers.{layer}.mlp.down_proj.lora_A.weight", "rearrange": "layer r mlp -> r mlp", "optional": true},
    {"from": "transformer.layers.stacked.mlp.down_proj.lora.lora_B.weight", "to": "base_model.model.model.layers.{layer}.mlp.down_proj.lora_B.weight", "rearrange": "layer embed r -> embed r", "optional": true}
  ]
})json";

struct Preset {
  std::string_view name;
  std::string_view json;
};

constexpr Preset kPresets[] = {{"levanter-llama", kLevanterLlama}};

}  // namespace

std::optional<TensorMap> tensor_map_preset(std::string_view name) {
  for (const Preset& preset : kPresets) {
    if (preset.name == name) return parse_tensor_map(preset.json, std::string("preset ") + std::string(name));
  }
  return std::nullopt;
}

std::string tensor_map_help() {
  std::string names;
  for (const Preset& preset : kPresets) names += (names.empty() ? "" : ", ") + std::string(preset.name);
  return "--map takes a preset (" + names + R"help() or a JSON map file:
  {"sizes": {"head_dim": 128},
   "rules": [{"from": "transformer.layers.stacked.self_attn.q_proj.weight",
              "to": "model.layers.{layer}.self_attn.q_proj.weight",
              "rearrange": "layer kv_heads q_per_group head_dim embed -> (kv_heads q_per_group head_dim) embed",
              "dtype": "bf16", "optional": false}]}
Each tensor takes the first rule whose "from" matches ({x} matches one dot-free part). "rearrange" is
einops-style: reorder axes (transpose), group them on the right (merge) or left (split, sizes
needed), drop one on the right to unstack it into one tensor per index ({axis} in "to"). The same
map runs backwards for import. A tensor no rule matches, a rule that matches nothing (unless
"optional"), a shape that does not factor and two outputs with one name are errors.)help";
}

std::vector<std::string> tensor_map_preset_names() {
  std::vector<std::string> names;
  for (const Preset& preset : kPresets) names.emplace_back(preset.name);
  return names;
}

}  // namespace reshard
