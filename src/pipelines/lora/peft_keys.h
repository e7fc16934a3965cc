// Every tensor name a PEFT LoRA adapter file holds, as merge-lora reads them:
// the factors of Linear and Embedding layers, lora_B's bias, DoRA's magnitude
// vector, and whole tensors (modules_to_save copies, saved base layers).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace reshard::pipelines_detail {

struct PeftKey {
  enum class Kind {
    kA,          // <module>.lora_A.weight, or <module>.lora_embedding_A ([r, num_embeddings])
    kB,          // <module>.lora_B.weight, or <module>.lora_embedding_B ([embedding_dim, r])
    kBBias,      // <module>.lora_B.bias (lora_bias: true)
    kMagnitude,  // <module>.lora_magnitude_vector (use_dora: true), one value per output feature
    kWhole,      // a whole tensor that replaces the base's `tensor`
  };
  Kind kind = Kind::kA;
  std::string module;  // the base model's module path; for kWhole the module that holds `tensor`
  std::string tensor;  // kWhole: the base tensor name it replaces ("lm_head.weight")
  bool embedding = false;    // lora_embedding_A / lora_embedding_B
  bool base_layer = false;   // kWhole saved as "<module>.base_layer.<param>" (PEFT's save_embedding_layers)
};

// Parses an adapter key ("base_model.model." + the rest); nullopt when the
// prefix is missing or the rest is empty. A key of no LoRA kind is kWhole:
// "<module>.modules_to_save.<adapter>.<param>" and "<module>.base_layer.<param>"
// name "<module>.<param>"; any other name is itself (PEFT saves modules_to_save
// copies under the base's own names). Whether a kWhole key is allowed is the
// caller's decision (it must match modules_to_save, or be a targeted base layer).
std::optional<PeftKey> parse_peft_key(std::string_view key);

}  // namespace reshard::pipelines_detail
