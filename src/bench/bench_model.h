// The benchmarks' whole model: a Llama-shaped list of tensors and two layouts to move it between.
#pragma once

#include <string>
#include <vector>

#include "reshard/execute/sharded_array.h"
#include "reshard/layout/sharding.h"

namespace reshard::bench {

struct BenchTensor {
  std::string name;
  Shape shape;
  DType dtype = DType::kBF16;
  bool norm = false;  // 1-D, replicated in both layouts
};

// Embedding and head [vocab, hidden], `layers` blocks of q, k, v, o, gate,
// up, down (bf16) and two f32 norms: 9 * layers + 3 tensors.
std::vector<BenchTensor> llama_shaped_model(int layers, int64_t hidden, int64_t ff, int64_t vocab);

// Fully sharded: matrices split along dimension 0 over every device in order.
NamedSharding fsdp_layout(const BenchTensor& tensor, const Topology& topology);

// Tensor parallel: matrices split along dimension 1 over every device with
// processes taking turns (device 0 of each process, then device 1, ...).
NamedSharding tensor_parallel_layout(const BenchTensor& tensor, const Topology& topology);

// This process's part of every tensor in `layout`, allocated (contents unset).
std::vector<ShardedArray> allocate_model(const std::vector<BenchTensor>& model, const Topology& topology,
                                         int process, NamedSharding (*layout)(const BenchTensor&, const Topology&));

// The model's bytes.
uint64_t model_bytes(const std::vector<BenchTensor>& model);

}  // namespace reshard::bench
