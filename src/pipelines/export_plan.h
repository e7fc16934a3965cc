// What an export writes: the map resolved against the source tensors, the
// outputs of the export's kind (model, adapter or merged model), each merged
// weight's LoRA factors and scaling, and the configs written beside them.
// Pure and computed identically on every process; every error comes here,
// before any byte is written.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reshard/formats/safetensors_layout.h"
#include "reshard/pipelines/export_model.h"
#include "reshard/pipelines/tensor_map_resolve.h"

namespace reshard::pipelines_detail {

// A weight's LoRA delta, by the outputs of the map that hold its factors.
struct ExportMerge {
  std::string module;  // "model.layers.0.self_attn.q_proj"
  size_t a = 0;        // index into ResolvedMap::outputs of lora_A
  size_t b = 0;        // ... of lora_B
  float scaling = 1;
  bool fan_in_fan_out = false;
};

// One tensor of the output folder.
struct ExportTensor {
  size_t output = 0;                  // index into ResolvedMap::outputs
  safetensors::TensorSpec spec;       // as written
  std::optional<ExportMerge> merge;   // kMergedModel: the delta added to it
};

struct ExportPlan {
  ExportKind kind = ExportKind::kModel;
  ResolvedMap resolved;
  std::vector<ExportTensor> tensors;     // in the order they are planned into files
  std::optional<std::string> hf_config;  // config.json to write (kModel, kMergedModel)
  std::optional<std::string> generation_config;  // generation_config.json to write (kModel, kMergedModel)
  std::optional<LoraConfig> lora;        // adapter_config.json to write (kAdapterOnly)
  size_t merged = 0;

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

// Plans the export of `sources` through `map`. Errors name the tensor, rule
// or adapter key at fault (see export_model.h).
ExportPlan plan_export(std::span<const safetensors::TensorSpec> sources, const TensorMap& map,
                       const ExportOptions& options, const ExportConfigs& fallback);

}  // namespace reshard::pipelines_detail
