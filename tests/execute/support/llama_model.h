// A Llama-shaped model (hundreds of tensors, mixed dtypes) and two layouts to move it between.
#pragma once

#include <string>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/sharding.h"
#include "reshard/layout/topology.h"

namespace reshard::testing {

// How a tensor is split under tensor parallelism (as Megatron splits Llama).
enum class TensorRole { kColumn, kRow, kEmbedding, kNorm };

struct ModelTensor {
  std::string name;
  Shape shape;
  DType dtype = DType::kBF16;
  TensorRole role = TensorRole::kNorm;
};

// Embedding, `layers` blocks of 9 tensors (q, k, v, o, gate, up, down in
// bf16, two f32 norms), final norm and head: 9 * layers + 3 tensors. `hidden`,
// `ff` and `vocab` must be divisible by the device counts used.
std::vector<ModelTensor> llama_shaped(int layers, int64_t hidden, int64_t ff, int64_t vocab);

// Fully sharded data parallel: every matrix split along dimension 0 over all
// devices in order; norms replicated everywhere.
NamedSharding fsdp_layout(const ModelTensor& tensor, const Topology& topology);

// Tensor parallel within a process, replicated across processes: mesh
// (data = processes, model = devices per process) with the devices dealt in
// another order; columns split on dimension 0 by model, rows and embeddings on
// dimension 1, norms replicated.
NamedSharding tensor_parallel_layout(const ModelTensor& tensor, const Topology& topology);

}  // namespace reshard::testing
