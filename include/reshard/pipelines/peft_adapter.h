// PEFT LoRA adapter folders: the key names, the check that every key names a
// module of the base model, and writing adapter_model.safetensors with
// adapter_config.json, as PEFT names and writes them.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/formats/safetensors_layout.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/pipelines/lora_config.h"
#include "reshard/storage/location.h"
#include "reshard/storage/object_writer.h"

namespace reshard {

// "base_model.model.": what PEFT puts before the base model's module path.
inline constexpr std::string_view kPeftKeyPrefix = "base_model.model.";

// What one adapter tensor is.
struct AdapterKey {
  enum class Factor { kA, kB };
  std::string module;  // the base model's module path, "model.layers.0.self_attn.q_proj"
  Factor factor = Factor::kA;
};

// Parses "base_model.model.<module>.lora_A.weight" (or lora_B); nullopt for
// any other name.
std::optional<AdapterKey> parse_adapter_key(std::string_view key);

// The adapter key of a module's factor.
std::string adapter_key(std::string_view module, AdapterKey::Factor factor);

// Checks that every key is a LoRA key whose module exists in the base model,
// i.e. `base_has("<module>.weight")`. Otherwise Error(kMissingTensor) naming
// the key, the module and `base_label`, with the likely fix when adding or
// dropping a leading path part would make it match (the silent prefix mistake:
// PEFT ignores such keys on load). A key that is not a LoRA key is
// Error(kUnsupported) naming it.
void check_adapter_keys(std::span<const std::string> keys, const std::function<bool(std::string_view)>& base_has,
                        std::string_view base_label);

// The check above for one key: `base_has("<module>.weight")`, else
// Error(kMissingTensor) naming the key, the module, `base_label` and the hint.
void check_adapter_module(std::string_view key, std::string_view module,
                          const std::function<bool(std::string_view)>& base_has, std::string_view base_label);

// The sorted distinct last parts of the modules whose LoRA factors `keys`
// hold (lora_A/lora_B, and lora_embedding_A/B of embeddings): the config's
// target_modules ("embed_tokens", "q_proj"). Other keys are skipped.
std::vector<std::string> target_modules_of(std::span<const std::string> keys);

struct WritePeftAdapterOptions {
  // Replace the adapter of an existing non-empty folder (its two files; the
  // folder's other files stay). Without it such a folder is refused.
  bool replace = false;
  // A folder in an object store: the weights are uploaded in parts of this
  // size (0: the store's default), at most parts_in_flight at once.
  storage::UploadOptions upload;
};

// What write_peft_adapter wrote.
struct WritePeftAdapterResult {
  size_t files = 0;    // files written: the weights and the config
  size_t tensors = 0;  // tensors in adapter_model.safetensors
  uint64_t bytes = 0;  // their bytes (the file's data, header not counted)
};

// Writes a PEFT adapter folder, local or in an object store:
// adapter_model.safetensors (metadata {"format": "pt"}) with `tensors`,
// produced by `produce`, and adapter_config.json as lora_config_json writes
// it. A local folder appears complete or not at all (replacing one is a
// single swap); in a store the weights are uploaded first (in parts, as
// `options.upload` says) and the config last, and a failure leaves nothing
// in a folder that was empty. An existing non-empty folder is refused
// (Error(kAlreadyExists) naming it) unless `options.replace`.
WritePeftAdapterResult write_peft_adapter(const LoraConfig& config,
                                          const std::vector<safetensors::TensorSpec>& tensors,
                                          const TensorProducer& produce, const storage::Location& folder,
                                          const WritePeftAdapterOptions& options = {});

}  // namespace reshard
