// A small Levanter-style Llama in the framework's layout (stacked layers,
// separate head axes, LoRA factors beside q, v, o and down), with random
// values, laid out over 4 devices of 2 processes in a shuffled device order;
// and the Hugging Face tensors it must become, computed here by plain loops.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "reshard/pipelines/named_array.h"

namespace reshard::testing {

struct LevanterDims {
  int64_t layers = 2, kv_heads = 2, q_per_group = 2, head_dim = 4, embed = 8, mlp = 12, vocab = 16, r = 2;
};

// One framework tensor: name, dtype, shape, and its values (exactly
// representable in the dtype) in row-major order.
struct FrameworkTensor {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<float> values;
  std::vector<std::byte> bytes() const;
};

// The model: base weights in `base_dtype`, LoRA factors in f32.
std::vector<FrameworkTensor> levanter_model(const LevanterDims& dims, DType base_dtype, std::mt19937_64& rng);

// This process's arrays of the model, laid out over devices [0, 2, 1, 3] of
// 2 processes (mesh data=2, model=2): stacked tensors split on their layer
// and second axes, others on what divides, 1-D ones replicated.
std::vector<NamedArray> levanter_arrays(const std::vector<FrameworkTensor>& model, int process);

// An HF tensor as the loops here compute it: values in f32 (before any cast).
struct HfTensor {
  Shape shape;
  std::vector<float> values;
};

// Every Hugging Face and PEFT tensor the levanter-llama preset makes of the
// model, by name, computed element by element from the framework tensors.
std::map<std::string, HfTensor> levanter_reference(const std::vector<FrameworkTensor>& model, const LevanterDims& dims);

// `values` as bytes of `dtype` (F32 or BF16, round to nearest even).
std::vector<std::byte> encode(const std::vector<float>& values, DType dtype);

}  // namespace reshard::testing
