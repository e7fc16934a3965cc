// A small Llama as Hugging Face writes it (and its LoRA adapter as PEFT
// does), with random values, and where each element of its Levanter-style
// framework tensors comes from, written out by hand for the tests of import.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/box.h"

namespace reshard::testing {

using Bytes = std::vector<std::byte>;
using TensorBytes = std::map<std::string, Bytes>;

struct LlamaDims {
  int64_t layers = 2, embed = 16, heads = 4, kv_heads = 2, head_dim = 4, mlp = 24, vocab = 32, r = 4;
  int64_t q_per_group() const { return heads / kv_heads; }
};

// The Hugging Face model tensors (embeddings and lm_head bf16, the rest f32).
std::vector<safetensors::TensorSpec> hf_llama_specs(const LlamaDims& dims);
// LoRA factors of q_proj and o_proj, PEFT names (f32).
std::vector<safetensors::TensorSpec> hf_lora_specs(const LlamaDims& dims);
// The framework tensors the levanter-llama preset makes of them (source dtypes).
std::vector<safetensors::TensorSpec> levanter_llama_specs(const LlamaDims& dims, bool with_lora);

std::string hf_llama_config_json(const LlamaDims& dims);
std::string hf_adapter_config_json(const LlamaDims& dims);

// Random values of `spec`: finite floats (so casts compare bit for bit), random bits otherwise.
Bytes random_values(const safetensors::TensorSpec& spec, std::mt19937_64& rng);

// Writes `tensors` (bytes by name) as a Hugging Face folder split at
// `max_shard_size` (an index when it needs several files), with `config` as
// config.json when given.
void write_hf_model_folder(const std::filesystem::path& folder, const std::vector<safetensors::TensorSpec>& specs,
                           const TensorBytes& tensors, uint64_t max_shard_size, const std::optional<std::string>& config);
// Writes adapter_model.safetensors and adapter_config.json into `folder`.
void write_peft_files(const std::filesystem::path& folder, const std::vector<safetensors::TensorSpec>& specs,
                      const TensorBytes& tensors, const std::string& adapter_config);

// Where element `index` of framework tensor `name` lives on the Hugging
// Face side under the preset: the tensor and the row-major element there.
struct HfElement {
  std::string name;
  int64_t flat = 0;
};
HfElement levanter_to_hf(const std::string& name, std::span<const int64_t> index, const LlamaDims& dims);

// Compares `box` of framework tensor `name` (dense bytes of `dtype`) with the
// Hugging Face values, element by element (cast f32 -> `dtype` when they
// differ); "" when equal, else a message naming the first difference.
std::string mismatch_with_hf(const std::string& name, const Box& box, std::span<const std::byte> bytes, DType dtype,
                             const TensorBytes& hf, const std::map<std::string, safetensors::TensorSpec>& hf_specs,
                             const LlamaDims& dims);

}  // namespace reshard::testing
