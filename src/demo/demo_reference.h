// What the demo's exports and imports must hold, computed from the model's
// value function with plain loops: the Hugging Face tensors by index
// arithmetic on the framework tensors, and the merged weights as
// W + (B @ A) * scaling in f32, rounded to bf16 (round to nearest even).
// Written apart from the library's copies and merges, so that it checks them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "demo/demo_model.h"

namespace reshard::demo {

// One tensor of a Hugging Face model or PEFT adapter, and where it comes from.
struct HfTensor {
  std::string name;
  DType dtype = DType::kBF16;
  Shape shape;
  size_t source = 0;                 // index into DemoModel::tensors
  std::optional<int64_t> layer;      // the slice of a stacked source
  bool merged = false;               // an adapted weight with its LoRA delta merged in

  uint64_t elements() const;
};

// The base model's tensors (model.*, lm_head.weight), one per layer for the
// stacked ones; with `merged`, each adapted weight carries its delta.
std::vector<HfTensor> hf_model_tensors(const DemoModel& model, bool merged);
// The adapter's tensors: base_model.model.model.layers.N.<module>.lora_A/B.weight.
std::vector<HfTensor> hf_adapter_tensors(const DemoModel& model);

// The bits of element `flat` (row-major) of `tensor`.
uint32_t hf_element_bits(const DemoModel& model, const HfTensor& tensor, uint64_t flat);

// The bits of element `flat` of framework tensor `tensor` after its LoRA
// delta is merged (for weights of adapted modules; other tensors unchanged):
// what importing the merged model must give.
uint32_t merged_framework_bits(const DemoModel& model, const FrameworkTensor& tensor, uint64_t flat);

// f32 to bf16, round to nearest even (NaN stays a quiet NaN).
uint16_t round_to_bf16(float value);

}  // namespace reshard::demo
