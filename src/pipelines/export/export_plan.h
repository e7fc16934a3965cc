// What an export writes: the map resolved against the source tensors, the
// outputs of the export's kind (model, adapter or merged model), each merged
// weight's LoRA factors, scaling and DoRA magnitudes, the biases and whole
// tensors the adapter changes, and the configs written beside them.
// Pure and computed identically on every process; every error comes here,
// before any byte is written.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pipelines/tensor_map/tensor_map_resolve.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/pipelines/export_model.h"

namespace reshard::pipelines_detail {

// A weight's LoRA delta, by the outputs of the map that hold its factors.
struct ExportMerge {
  std::string module;  // "model.layers.0.self_attn.q_proj"
  size_t a = 0;        // index into ResolvedMap::outputs of lora_A (or lora_embedding_A)
  size_t b = 0;        // ... of lora_B (or lora_embedding_B)
  std::optional<size_t> magnitude;  // ... of DoRA's lora_magnitude_vector
  float scaling = 1;
  // W is [in, out] as the factors see it (GPT-2's Conv1D, every embedding).
  bool fan_in_fan_out = false;

  // DoRA's norms run down W's columns: every block needs all of W's rows.
  bool needs_whole_weight() const { return magnitude && fan_in_fan_out; }
};

// A bias with lora_B's bias added (lora_bias).
struct ExportBiasMerge {
  size_t lora_bias = 0;  // index into ResolvedMap::outputs of lora_B.bias
  float scaling = 1;
};

// One tensor of the output folder.
struct ExportTensor {
  // Index into ResolvedMap::outputs of what it is made from: the output of
  // its own name, or the adapter's whole copy that replaces it
  // (modules_to_save).
  size_t output = 0;
  safetensors::TensorSpec spec;            // as written
  std::optional<ExportMerge> merge;        // kMergedModel: the delta added to it
  std::optional<ExportBiasMerge> bias;     // kMergedModel: lora_B's bias added to it
};

struct ExportPlan {
  ExportKind kind = ExportKind::kModel;
  ResolvedMap resolved;
  std::vector<ExportTensor> tensors;     // in the order they are planned into files
  std::optional<std::string> hf_config;  // config.json to write (kModel, kMergedModel)
  std::optional<std::string> generation_config;  // generation_config.json to write (kModel, kMergedModel)
  std::optional<LoraConfig> lora;        // adapter_config.json to write (kAdapterOnly)
  size_t merged = 0;                     // weights a LoRA delta is merged into

  // Sum of the tensors' bytes.
  uint64_t total_bytes() const;
};

// The configs an export falls back on (the checkpoint's metadata keys).
struct ExportConfigs {
  std::optional<std::string> hf_config;
  std::optional<std::string> lora_config;
  std::string label;
  std::optional<std::string> generation_config;  // where they come from, for messages
};

// A merged export's base model, for a source that holds LoRA factors alone
// (a LoRA run saves only what it trains): its tensors, under their Hugging
// Face names, are the weights the factors merge into. In the export's input
// they follow the source's own tensors.
struct MergeBase {
  std::vector<safetensors::TensorSpec> specs;
  std::string label;  // "the base model s3://bucket/llama", for messages
};

// Plans the export of `sources` through `map` (and, for a merged model with
// `base`, of the base's tensors as they are, each source index past the
// source's own). Errors name the tensor, rule or adapter key at fault (see
// export_model.h).
ExportPlan plan_export(std::span<const safetensors::TensorSpec> sources, const TensorMap& map,
                       const ExportOptions& options, const ExportConfigs& fallback, const MergeBase* base = nullptr);

}  // namespace reshard::pipelines_detail
