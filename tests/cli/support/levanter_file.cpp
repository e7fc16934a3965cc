#include "cli/support/levanter_file.h"

#include <cstring>
#include <utility>

#include "reshard/formats/safetensors_writer.h"

namespace reshard::testing {

std::map<std::string, std::vector<std::byte>> write_levanter_file(const std::filesystem::path& path,
                                                                  std::mt19937_64& rng, bool with_configs,
                                                                  bool factors_only) {
  const uint64_t L = 2, KV = 2, G = 2, D = 4, E = 16, M = 24, V = 32, R = 4;
  const std::string s = "transformer.layers.stacked.";
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> shapes = {
      {"embeddings.token_embeddings.weight", {V, E}},
      {s + "self_attn.q_proj.weight", {L, KV, G, D, E}},
      {s + "self_attn.k_proj.weight", {L, KV, D, E}},
      {s + "self_attn.v_proj.weight", {L, KV, D, E}},
      {s + "self_attn.o_proj.weight", {L, E, KV * G, D}},
      {s + "mlp.gate_proj.weight", {L, M, E}},
      {s + "mlp.up_proj.weight", {L, M, E}},
      {s + "mlp.down_proj.weight", {L, E, M}},
      {s + "input_layernorm.weight", {L, E}},
      {s + "post_attention_layernorm.weight", {L, E}},
      {"transformer.norm.weight", {E}},
      {s + "self_attn.q_proj.lora.lora_A.weight", {L, R, E}},
      {s + "self_attn.q_proj.lora.lora_B.weight", {L, KV, G, D, R}},
      {s + "self_attn.v_proj.lora.lora_A.weight", {L, R, E}},
      {s + "self_attn.v_proj.lora.lora_B.weight", {L, KV, D, R}},
  };
  std::map<std::string, std::vector<std::byte>> bytes;
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const auto& [name, shape] : shapes) {
    uint64_t n = 1;
    for (const uint64_t d : shape) n *= d;
    std::vector<std::byte>& b = bytes[name];
    b.resize(static_cast<size_t>(n) * 4);
    for (size_t i = 0; i < n; ++i) {
      const float v = dist(rng);
      std::memcpy(&b[i * 4], &v, 4);
    }
  }
  std::vector<safetensors::TensorData> data;
  for (const auto& [name, shape] : shapes) {
    if (factors_only && name.find(".lora.") == std::string::npos) continue;
    data.push_back({{name, DType::kF32, shape}, bytes.at(name)});
  }
  safetensors::Metadata metadata = {{"format", "pt"}};
  if (with_configs) {
    metadata.emplace_back("reshard.hf_config", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 16})");
    metadata.emplace_back("reshard.lora_config", R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8})");
  }
  safetensors::write_file(path, data, metadata);
  return bytes;
}

}  // namespace reshard::testing
