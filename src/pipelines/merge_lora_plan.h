// What merge-lora does to each base tensor, decided from the adapter's keys
// and config before anything is written: merge a LoRA delta (plain, DoRA,
// embedding), add lora_B's bias, or take a whole tensor from the adapter.
#pragma once

#include <map>
#include <string>

#include "reshard/formats/tensor_catalog.h"
#include "reshard/pipelines/lora_config.h"

namespace reshard::pipelines_detail {

// One adapted module's tensors in the adapter, and how PEFT merges them.
struct MergeModule {
  std::string name;
  const TensorCatalog::Entry* a = nullptr;
  const TensorCatalog::Entry* b = nullptr;
  const TensorCatalog::Entry* bias = nullptr;       // lora_B.bias
  const TensorCatalog::Entry* magnitude = nullptr;  // DoRA's lora_magnitude_vector
  bool embedding = false;
  // W is [in, out] as the factors see it: GPT-2's Conv1D with fan_in_fan_out,
  // and every embedding ([num_embeddings, dim], whose delta PEFT transposes).
  bool fan_in_fan_out = false;
  float scaling = 0;
};

struct MergePlan {
  std::map<std::string, MergeModule> modules;                    // by base weight name
  std::map<std::string, const MergeModule*> biases;              // base bias name -> its module
  std::map<std::string, const TensorCatalog::Entry*> replaced;  // base tensor -> the adapter's whole copy
};

// Pairs and checks every adapter key against `base` and `config`: a key of no
// kind PEFT writes, a whole tensor that modules_to_save does not list, DoRA
// magnitudes without use_dora (or the reverse), a bias without lora_bias, are
// Error(kUnsupported) naming the key or module; a module or tensor the base
// lacks Error(kMissingTensor); shapes that do not fit Error(kInvalidArgument).
MergePlan plan_merge(const TensorCatalog& base, const TensorCatalog& adapter, const LoraConfig& config,
                     const std::string& base_label);

}  // namespace reshard::pipelines_detail
