#include "execute/support/llama_model.h"

#include <fmt/format.h>

namespace reshard::testing {

std::vector<ModelTensor> llama_shaped(int layers, int64_t hidden, int64_t ff, int64_t vocab) {
  std::vector<ModelTensor> model;
  model.push_back({"embed_tokens.weight", {vocab, hidden}, DType::kBF16, TensorRole::kEmbedding});
  for (int l = 0; l < layers; ++l) {
    const std::string prefix = fmt::format("layers.{}.", l);
    model.push_back({prefix + "input_layernorm.weight", {hidden}, DType::kF32, TensorRole::kNorm});
    for (const char* name : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}) {
      model.push_back({prefix + name + ".weight", {hidden, hidden}, DType::kBF16, TensorRole::kColumn});
    }
    model.push_back({prefix + "self_attn.o_proj.weight", {hidden, hidden}, DType::kBF16, TensorRole::kRow});
    model.push_back({prefix + "post_attention_layernorm.weight", {hidden}, DType::kF32, TensorRole::kNorm});
    model.push_back({prefix + "mlp.gate_proj.weight", {ff, hidden}, DType::kBF16, TensorRole::kColumn});
    model.push_back({prefix + "mlp.up_proj.weight", {ff, hidden}, DType::kBF16, TensorRole::kColumn});
    model.push_back({prefix + "mlp.down_proj.weight", {hidden, ff}, DType::kBF16, TensorRole::kRow});
  }
  model.push_back({"norm.weight", {hidden}, DType::kF32, TensorRole::kNorm});
  model.push_back({"lm_head.weight", {vocab, hidden}, DType::kBF16, TensorRole::kColumn});
  return model;
}

NamedSharding fsdp_layout(const ModelTensor& tensor, const Topology& topology) {
  std::vector<DeviceId> devices;
  for (DeviceId d = 0; d < topology.num_devices(); ++d) devices.push_back(d);
  Mesh mesh({{"fsdp", topology.num_devices()}}, std::move(devices));
  if (tensor.role == TensorRole::kNorm) return NamedSharding(std::move(mesh), PartitionSpec());
  return NamedSharding(std::move(mesh), PartitionSpec({{"fsdp"}}));
}

NamedSharding tensor_parallel_layout(const ModelTensor& tensor, const Topology& topology) {
  const int64_t processes = topology.num_processes();
  const int64_t per_process = topology.num_devices() / processes;
  // Each process's devices in reverse, so even within a process shards move.
  std::vector<DeviceId> devices;
  for (int p = 0; p < topology.num_processes(); ++p) {
    const std::vector<DeviceId> own = topology.devices_of(p);
    devices.insert(devices.end(), own.rbegin(), own.rend());
  }
  Mesh mesh({{"data", processes}, {"model", per_process}}, std::move(devices));
  switch (tensor.role) {
    case TensorRole::kColumn:
      return NamedSharding(std::move(mesh), PartitionSpec({{"model"}}));
    case TensorRole::kRow:
    case TensorRole::kEmbedding:
      return NamedSharding(std::move(mesh), PartitionSpec({{}, {"model"}}));
    case TensorRole::kNorm:
      break;
  }
  return NamedSharding(std::move(mesh), PartitionSpec());
}

}  // namespace reshard::testing
