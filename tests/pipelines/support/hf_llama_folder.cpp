#include "pipelines/support/hf_llama_folder.h"

#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "formats/hf_folder_plan.h"
#include "formats/hf_folder_writer.h"
#include "layout/float_convert.h"
#include "reshard/formats/safetensors_writer.h"

namespace reshard::testing {

using formats_detail::HfFolderPlan;
using formats_detail::write_hf_folder;
using layout_detail::f32_to_bf16;

namespace {

namespace fs = std::filesystem;
using safetensors::TensorSpec;

using U = uint64_t;
const std::string kStacked = "transformer.layers.stacked.";

void write_text_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string layer_name(int64_t layer, const std::string& rest) { return fmt::format("model.layers.{}.{}", layer, rest); }

size_t width(DType dtype) { return element_bytes(dtype); }

}  // namespace

std::vector<TensorSpec> hf_llama_specs(const LlamaDims& d) {
  const U E = U(d.embed), QD = U(d.heads * d.head_dim), KD = U(d.kv_heads * d.head_dim), M = U(d.mlp), V = U(d.vocab);
  std::vector<TensorSpec> specs = {{"model.embed_tokens.weight", DType::kBF16, {V, E}}};
  for (int64_t l = 0; l < d.layers; ++l) {
    specs.push_back({layer_name(l, "self_attn.q_proj.weight"), DType::kF32, {QD, E}});
    specs.push_back({layer_name(l, "self_attn.k_proj.weight"), DType::kF32, {KD, E}});
    specs.push_back({layer_name(l, "self_attn.v_proj.weight"), DType::kF32, {KD, E}});
    specs.push_back({layer_name(l, "self_attn.o_proj.weight"), DType::kF32, {E, QD}});
    specs.push_back({layer_name(l, "mlp.gate_proj.weight"), DType::kF32, {M, E}});
    specs.push_back({layer_name(l, "mlp.up_proj.weight"), DType::kF32, {M, E}});
    specs.push_back({layer_name(l, "mlp.down_proj.weight"), DType::kF32, {E, M}});
    specs.push_back({layer_name(l, "input_layernorm.weight"), DType::kF32, {E}});
    specs.push_back({layer_name(l, "post_attention_layernorm.weight"), DType::kF32, {E}});
  }
  specs.push_back({"model.norm.weight", DType::kF32, {E}});
  specs.push_back({"lm_head.weight", DType::kBF16, {V, E}});
  return specs;
}

std::vector<TensorSpec> hf_lora_specs(const LlamaDims& d) {
  const U E = U(d.embed), QD = U(d.heads * d.head_dim), R = U(d.r);
  std::vector<TensorSpec> specs;
  for (int64_t l = 0; l < d.layers; ++l) {
    const std::string p = fmt::format("base_model.model.model.layers.{}.self_attn.", l);
    specs.push_back({p + "q_proj.lora_A.weight", DType::kF32, {R, E}});
    specs.push_back({p + "q_proj.lora_B.weight", DType::kF32, {QD, R}});
    specs.push_back({p + "o_proj.lora_A.weight", DType::kF32, {R, QD}});
    specs.push_back({p + "o_proj.lora_B.weight", DType::kF32, {E, R}});
  }
  return specs;
}

std::vector<TensorSpec> levanter_llama_specs(const LlamaDims& d, bool with_lora) {
  const U L = U(d.layers), E = U(d.embed), H = U(d.heads), KV = U(d.kv_heads), G = U(d.q_per_group()),
          D = U(d.head_dim), M = U(d.mlp), V = U(d.vocab), R = U(d.r);
  std::vector<TensorSpec> specs = {
      {"embeddings.token_embeddings.weight", DType::kBF16, {V, E}},
      {kStacked + "self_attn.q_proj.weight", DType::kF32, {L, KV, G, D, E}},
      {kStacked + "self_attn.k_proj.weight", DType::kF32, {L, KV, D, E}},
      {kStacked + "self_attn.v_proj.weight", DType::kF32, {L, KV, D, E}},
      {kStacked + "self_attn.o_proj.weight", DType::kF32, {L, E, H, D}},
      {kStacked + "mlp.gate_proj.weight", DType::kF32, {L, M, E}},
      {kStacked + "mlp.up_proj.weight", DType::kF32, {L, M, E}},
      {kStacked + "mlp.down_proj.weight", DType::kF32, {L, E, M}},
      {kStacked + "input_layernorm.weight", DType::kF32, {L, E}},
      {kStacked + "post_attention_layernorm.weight", DType::kF32, {L, E}},
      {"transformer.norm.weight", DType::kF32, {E}},
      {"lm_head.weight", DType::kBF16, {V, E}},
  };
  if (with_lora) {
    specs.push_back({kStacked + "self_attn.q_proj.lora.lora_A.weight", DType::kF32, {L, R, E}});
    specs.push_back({kStacked + "self_attn.q_proj.lora.lora_B.weight", DType::kF32, {L, KV, G, D, R}});
    specs.push_back({kStacked + "self_attn.o_proj.lora.lora_A.weight", DType::kF32, {L, R, H, D}});
    specs.push_back({kStacked + "self_attn.o_proj.lora.lora_B.weight", DType::kF32, {L, E, R}});
  }
  return specs;
}

std::string hf_llama_config_json(const LlamaDims& d) {
  return fmt::format(
      R"({{"architectures": ["LlamaForCausalLM"], "hidden_size": {}, "intermediate_size": {}, "num_attention_heads": {}, "num_key_value_heads": {}, "head_dim": {}, "num_hidden_layers": {}, "vocab_size": {}, "rms_norm_eps": 1e-05, "torch_dtype": "float32"}})",
      d.embed, d.mlp, d.heads, d.kv_heads, d.head_dim, d.layers, d.vocab);
}

std::string hf_adapter_config_json(const LlamaDims& d) {
  return fmt::format(
      "{{\n  \"lora_alpha\": {},\n  \"peft_type\": \"LORA\",\n  \"r\": {},\n  \"target_modules\": [\n    \"q_proj\",\n    "
      "\"o_proj\"\n  ],\n  \"task_type\": \"CAUSAL_LM\"\n}}",
      2 * d.r, d.r);
}

Bytes random_values(const TensorSpec& spec, std::mt19937_64& rng) {
  const size_t count = static_cast<size_t>(safetensors::element_count(spec.shape, spec.name));
  Bytes bytes(count * width(spec.dtype));
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (size_t i = 0; i < count; ++i) {
    if (spec.dtype == DType::kF32) {
      const float value = dist(rng);
      std::memcpy(&bytes[i * 4], &value, 4);
    } else if (spec.dtype == DType::kBF16) {
      const uint16_t value = f32_to_bf16(dist(rng));
      std::memcpy(&bytes[i * 2], &value, 2);
    } else {
      for (size_t b = 0; b < width(spec.dtype); ++b) bytes[i * width(spec.dtype) + b] = static_cast<std::byte>(rng() & 0xff);
    }
  }
  return bytes;
}

void write_hf_model_folder(const fs::path& folder, const std::vector<TensorSpec>& specs, const TensorBytes& tensors,
                           uint64_t max_shard_size, const std::optional<std::string>& config) {
  const HfFolderPlan plan = HfFolderPlan::plan(specs, max_shard_size);
  write_hf_folder(
      folder, plan, [&](const safetensors::TensorInfo& tensor, const ByteSink& sink) { sink(tensors.at(tensor.name)); },
      false);
  if (config) write_text_file(folder / "config.json", *config);
}

void write_peft_files(const fs::path& folder, const std::vector<TensorSpec>& specs, const TensorBytes& tensors,
                      const std::string& adapter_config) {
  fs::create_directories(folder);
  std::vector<safetensors::TensorData> data;
  for (const TensorSpec& spec : specs) data.push_back({spec, tensors.at(spec.name)});
  safetensors::write_file(folder / "adapter_model.safetensors", data);
  write_text_file(folder / "adapter_config.json", adapter_config);
}

HfElement levanter_to_hf(const std::string& name, std::span<const int64_t> i, const LlamaDims& d) {
  const int64_t E = d.embed, G = d.q_per_group(), D = d.head_dim, QD = d.heads * d.head_dim, M = d.mlp, R = d.r;
  const auto ends = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const auto attn = [&](const std::string& rest) { return layer_name(i[0], "self_attn." + rest); };
  const std::string lora = fmt::format("base_model.model.model.layers.{}.self_attn.", i.empty() ? 0 : i[0]);
  if (name == "embeddings.token_embeddings.weight") return {"model.embed_tokens.weight", i[0] * E + i[1]};
  if (name == "lm_head.weight") return {"lm_head.weight", i[0] * E + i[1]};
  if (name == "transformer.norm.weight") return {"model.norm.weight", i[0]};
  if (ends("q_proj.lora.lora_A.weight")) return {lora + "q_proj.lora_A.weight", i[1] * E + i[2]};
  if (ends("q_proj.lora.lora_B.weight")) return {lora + "q_proj.lora_B.weight", ((i[1] * G + i[2]) * D + i[3]) * R + i[4]};
  if (ends("o_proj.lora.lora_A.weight")) return {lora + "o_proj.lora_A.weight", i[1] * QD + i[2] * D + i[3]};
  if (ends("o_proj.lora.lora_B.weight")) return {lora + "o_proj.lora_B.weight", i[1] * R + i[2]};
  if (ends("q_proj.weight")) return {attn("q_proj.weight"), ((i[1] * G + i[2]) * D + i[3]) * E + i[4]};
  if (ends("k_proj.weight")) return {attn("k_proj.weight"), (i[1] * D + i[2]) * E + i[3]};
  if (ends("v_proj.weight")) return {attn("v_proj.weight"), (i[1] * D + i[2]) * E + i[3]};
  if (ends("o_proj.weight")) return {attn("o_proj.weight"), i[1] * QD + i[2] * D + i[3]};
  if (ends("gate_proj.weight")) return {layer_name(i[0], "mlp.gate_proj.weight"), i[1] * E + i[2]};
  if (ends("up_proj.weight")) return {layer_name(i[0], "mlp.up_proj.weight"), i[1] * E + i[2]};
  if (ends("down_proj.weight")) return {layer_name(i[0], "mlp.down_proj.weight"), i[1] * M + i[2]};
  if (ends("input_layernorm.weight")) return {layer_name(i[0], "input_layernorm.weight"), i[1]};
  if (ends("post_attention_layernorm.weight")) return {layer_name(i[0], "post_attention_layernorm.weight"), i[1]};
  return {"(unknown framework tensor " + name + ")", 0};
}

std::string mismatch_with_hf(const std::string& name, const Box& box, std::span<const std::byte> bytes, DType dtype,
                             const TensorBytes& hf, const std::map<std::string, TensorSpec>& hf_specs,
                             const LlamaDims& dims) {
  const size_t out_width = width(dtype);
  if (bytes.size() != static_cast<size_t>(box.volume()) * out_width) return name + ": wrong byte count";
  std::vector<int64_t> index(box.rank());
  for (int64_t e = 0; e < box.volume(); ++e) {
    int64_t rest = e;
    for (size_t k = box.rank(); k-- > 0;) {
      index[k] = box.origin()[k] + rest % box.shape()[k];
      rest /= box.shape()[k];
    }
    const HfElement source = levanter_to_hf(name, index, dims);
    const auto spec = hf_specs.find(source.name);
    if (spec == hf_specs.end()) return fmt::format("{}: no Hugging Face tensor {}", name, source.name);
    const size_t in_width = width(spec->second.dtype);
    const std::byte* in = hf.at(source.name).data() + static_cast<size_t>(source.flat) * in_width;
    std::byte expected[8] = {};
    if (spec->second.dtype == dtype) {
      std::memcpy(expected, in, in_width);
    } else if (spec->second.dtype == DType::kF32 && dtype == DType::kBF16) {
      float value = 0;
      std::memcpy(&value, in, 4);
      const uint16_t bits = f32_to_bf16(value);
      std::memcpy(expected, &bits, 2);
    } else {
      return fmt::format("{}: no reference cast from {} to {}", name, dtype_name(spec->second.dtype), dtype_name(dtype));
    }
    if (std::memcmp(expected, bytes.data() + static_cast<size_t>(e) * out_width, out_width) != 0) {
      return fmt::format("{}[{}] differs from {} element {}", name, fmt::join(index, ","), source.name, source.flat);
    }
  }
  return "";
}

}  // namespace reshard::testing
