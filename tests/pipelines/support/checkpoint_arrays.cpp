#include "pipelines/support/checkpoint_arrays.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace reshard::testing {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

ElementFunction values_of(uint64_t version, uint64_t salt) {
  return [version, salt](std::span<const int64_t> index, std::span<std::byte> out) {
    uint64_t h = mix(version * 1315423911ULL + salt);
    for (int64_t i : index) h = mix(h ^ static_cast<uint64_t>(i));
    for (size_t b = 0; b < out.size(); ++b) out[b] = static_cast<std::byte>((h >> (8 * (b % 8))) & 0xFF);
  };
}

}  // namespace

std::vector<TensorDef> small_model() {
  return {{"embed", {8, 6}, DType::kF32},
          {"layers.0.w", {8, 4, 2}, DType::kBF16},
          {"bias", {8}, DType::kI32},
          {"step", {}, DType::kI64},
          {"opt.m", {8, 6}, DType::kF32}};
}

NamedSharding sharding_for(const LayoutDef& layout, const TensorDef& tensor, size_t index) {
  PartitionSpec spec = index < layout.specs.size() ? layout.specs[index] : PartitionSpec();
  std::vector<SpecEntry> entries = spec.entries();
  if (entries.size() > tensor.shape.size()) entries.resize(tensor.shape.size());
  return NamedSharding(layout.mesh, PartitionSpec(entries));
}

Topology topology_for(const LayoutDef& layout) {
  DeviceId largest = 0;
  for (DeviceId d : layout.mesh.devices()) largest = std::max(largest, d);
  return Topology::uniform(largest + 1, layout.processes);
}

std::vector<NamedArray> make_arrays(const std::vector<TensorDef>& model, const LayoutDef& layout, int process,
                                    uint64_t version) {
  std::vector<NamedArray> arrays;
  for (size_t i = 0; i < model.size(); ++i) {
    arrays.push_back({model[i].name, ShardedArray::from_function(model[i].shape, model[i].dtype,
                                                                 sharding_for(layout, model[i], i),
                                                                 topology_for(layout), process, values_of(version, i))});
  }
  return arrays;
}

std::vector<RestoreTarget> targets_for(const std::vector<TensorDef>& model, const LayoutDef& layout) {
  std::vector<RestoreTarget> targets;
  for (size_t i = 0; i < model.size(); ++i) targets.push_back({model[i].name, sharding_for(layout, model[i], i), topology_for(layout)});
  return targets;
}

std::string mismatch(const NamedArray& array, uint64_t version) {
  const std::vector<TensorDef> model = small_model();
  size_t salt = 0;
  while (salt < model.size() && model[salt].name != array.name) ++salt;
  const ShardedArray expected =
      ShardedArray::from_function(array.array.shape(), array.array.dtype(), array.array.sharding(),
                                  array.array.topology(), array.array.process(), values_of(version, salt));
  for (size_t s = 0; s < expected.shards().size(); ++s) {
    const Shard& want = expected.shards()[s];
    const Shard& got = array.array.shards()[s];
    if (want.box != got.box || want.buffer.size() != got.buffer.size() ||
        (want.buffer.size() > 0 && std::memcmp(want.buffer.data(), got.buffer.data(), want.buffer.size()) != 0)) {
      return fmt::format("{}: device {} box {} differs from version {}", array.name, got.device, got.box.to_string(),
                         version);
    }
  }
  return "";
}

}  // namespace reshard::testing
