#include "bench/bench_model.h"

#include <fmt/format.h>

namespace reshard::bench {
namespace {

std::vector<DeviceId> processes_take_turns(const Topology& topology) {
  std::vector<DeviceId> order;
  const size_t per_process = topology.devices_of(0).size();
  for (size_t local = 0; local < per_process; ++local) {
    for (int p = 0; p < topology.num_processes(); ++p) order.push_back(topology.devices_of(p)[local]);
  }
  return order;
}

}  // namespace

std::vector<BenchTensor> llama_shaped_model(int layers, int64_t hidden, int64_t ff, int64_t vocab) {
  std::vector<BenchTensor> model;
  model.push_back({"embed_tokens.weight", {vocab, hidden}, DType::kBF16, false});
  for (int l = 0; l < layers; ++l) {
    const std::string prefix = fmt::format("layers.{}.", l);
    model.push_back({prefix + "input_layernorm.weight", {hidden}, DType::kF32, true});
    for (const char* name : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      model.push_back({prefix + "self_attn." + name + ".weight", {hidden, hidden}, DType::kBF16, false});
    }
    model.push_back({prefix + "post_attention_layernorm.weight", {hidden}, DType::kF32, true});
    model.push_back({prefix + "mlp.gate_proj.weight", {ff, hidden}, DType::kBF16, false});
    model.push_back({prefix + "mlp.up_proj.weight", {ff, hidden}, DType::kBF16, false});
    model.push_back({prefix + "mlp.down_proj.weight", {hidden, ff}, DType::kBF16, false});
  }
  model.push_back({"norm.weight", {hidden}, DType::kF32, true});
  model.push_back({"lm_head.weight", {vocab, hidden}, DType::kBF16, false});
  return model;
}

NamedSharding fsdp_layout(const BenchTensor& tensor, const Topology& topology) {
  std::vector<DeviceId> devices;
  for (DeviceId d = 0; d < topology.num_devices(); ++d) devices.push_back(d);
  Mesh mesh({{"fsdp", topology.num_devices()}}, std::move(devices));
  return NamedSharding(std::move(mesh), tensor.norm ? PartitionSpec() : PartitionSpec({{"fsdp"}}));
}

NamedSharding tensor_parallel_layout(const BenchTensor& tensor, const Topology& topology) {
  Mesh mesh({{"model", topology.num_devices()}}, processes_take_turns(topology));
  return NamedSharding(std::move(mesh), tensor.norm ? PartitionSpec() : PartitionSpec({{}, {"model"}}));
}

std::vector<ShardedArray> allocate_model(const std::vector<BenchTensor>& model, const Topology& topology,
                                         int process, NamedSharding (*layout)(const BenchTensor&, const Topology&)) {
  std::vector<ShardedArray> arrays;
  arrays.reserve(model.size());
  for (const BenchTensor& t : model) {
    arrays.push_back(ShardedArray::allocate(t.shape, t.dtype, layout(t, topology), topology, process));
    for (size_t i = 0; i < arrays.back().shards().size(); ++i) std::ranges::fill(arrays.back().writable_bytes(i), std::byte{1});
  }
  return arrays;
}

uint64_t model_bytes(const std::vector<BenchTensor>& model) {
  uint64_t bytes = 0;
  for (const BenchTensor& t : model) {
    uint64_t n = whole_element_bytes(t.dtype);
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    bytes += n;
  }
  return bytes;
}

}  // namespace reshard::bench
