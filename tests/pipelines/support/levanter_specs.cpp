#include "pipelines/support/levanter_specs.h"

#include <cstdint>
#include <string>

namespace reshard::testing {

std::vector<safetensors::TensorSpec> levanter_specs(const LevanterDims& dims) {
  const auto u = [](int64_t n) { return static_cast<uint64_t>(n); };  // file shapes count unsigned
  const uint64_t L = u(dims.layers), E = u(dims.embed), KV = u(dims.kv_heads), G = u(dims.q_per_group);
  const uint64_t D = u(dims.head_dim), M = u(dims.mlp), V = u(dims.vocab), R = u(dims.r);
  const std::string s = "transformer.layers.stacked.";
  return {
      {"embeddings.token_embeddings.weight", DType::kBF16, {V, E}},
      {s + "self_attn.q_proj.weight", DType::kF32, {L, KV, G, D, E}},
      {s + "self_attn.k_proj.weight", DType::kF32, {L, KV, D, E}},
      {s + "self_attn.v_proj.weight", DType::kF32, {L, KV, D, E}},
      {s + "self_attn.o_proj.weight", DType::kF32, {L, E, KV * G, D}},
      {s + "mlp.gate_proj.weight", DType::kF32, {L, M, E}},
      {s + "mlp.up_proj.weight", DType::kF32, {L, M, E}},
      {s + "mlp.down_proj.weight", DType::kF32, {L, E, M}},
      {s + "input_layernorm.weight", DType::kF32, {L, E}},
      {s + "post_attention_layernorm.weight", DType::kF32, {L, E}},
      {"transformer.norm.weight", DType::kF32, {E}},
      {"lm_head.weight", DType::kF32, {V, E}},
      {s + "self_attn.q_proj.lora.lora_A.weight", DType::kF32, {L, R, E}},
      {s + "self_attn.q_proj.lora.lora_B.weight", DType::kF32, {L, KV, G, D, R}},
      {s + "self_attn.o_proj.lora.lora_A.weight", DType::kF32, {L, R, KV * G, D}},
      {s + "self_attn.o_proj.lora.lora_B.weight", DType::kF32, {L, E, R}},
  };
}

}  // namespace reshard::testing
