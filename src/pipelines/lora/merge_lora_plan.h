// How a PEFT LoRA adapter changes each base tensor, decided from the
// adapter's keys and config before anything is written: merge a LoRA delta
// (plain, DoRA, embedding), add lora_B's bias, or take a whole tensor from the
// adapter. Shared by merge-lora (adapter and base are folders) and export
// (both are outputs of a tensor map), so it sees tensors by name, dtype and
// shape only.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "reshard/formats/safetensors_layout.h"
#include "reshard/formats/tensor_catalog.h"
#include "reshard/pipelines/lora_config.h"

namespace reshard::pipelines_detail {

// The base model's tensor called `name`, or nullopt when it has none.
using BaseTensors = std::function<std::optional<safetensors::TensorSpec>(std::string_view name)>;

// The base tensors of a model's files (valid while `catalog` lives).
BaseTensors catalog_tensors(const TensorCatalog& catalog);

// One adapted module's tensors, as indices into the adapter's tensors, and
// how PEFT merges them.
struct MergeModule {
  std::string name;
  size_t a = 0;
  size_t b = 0;
  std::optional<size_t> bias;       // lora_B.bias
  std::optional<size_t> magnitude;  // DoRA's lora_magnitude_vector
  bool embedding = false;
  // W is [in, out] as the factors see it: GPT-2's Conv1D with fan_in_fan_out,
  // and every embedding ([num_embeddings, dim], whose delta PEFT transposes).
  bool fan_in_fan_out = false;
  float scaling = 0;
};

struct MergePlan {
  std::map<std::string, MergeModule> modules;        // by base weight name ("<module>.weight")
  std::map<std::string, const MergeModule*> biases;  // base bias name -> its module
  std::map<std::string, size_t> replaced;            // base tensor -> the adapter's whole copy
};

// Pairs and checks every adapter tensor against the base and `config`: a key
// of no kind PEFT writes, a whole tensor that modules_to_save does not list,
// DoRA magnitudes without use_dora (or the reverse), a bias without
// lora_bias, are Error(kUnsupported) naming the key or module; a module or
// tensor the base lacks Error(kMissingTensor) naming `base_label`; shapes that
// do not fit Error(kInvalidArgument).
MergePlan plan_merge(std::span<const safetensors::TensorSpec> adapter, const BaseTensors& base,
                     const LoraConfig& config, const std::string& base_label);

}  // namespace reshard::pipelines_detail
