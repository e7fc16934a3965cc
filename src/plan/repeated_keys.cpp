#include "repeated_keys.h"

namespace reshard::plan_detail {
namespace {

// One FNV-1a step per value.
void mix(uint64_t& hash, uint64_t value) { hash = (hash ^ value) * 0x100000001b3ULL; }

void mix_sharding(uint64_t& hash, const NamedSharding& sharding) {
  for (const MeshAxis& axis : sharding.mesh().axes()) mix(hash, static_cast<uint64_t>(axis.size));
  for (DeviceId d : sharding.mesh().devices()) mix(hash, static_cast<uint64_t>(d));
  const std::vector<SpecEntry>& entries = sharding.spec().entries();
  size_t used = entries.size();
  while (used > 0 && entries[used - 1].empty()) --used;  // P('x') == P('x', None)
  for (size_t i = 0; i < used; ++i) mix(hash, entries[i].size());
  mix(hash, static_cast<uint64_t>(sharding.memory_kind()) * 2 + sharding.uneven());
}

}  // namespace

size_t RepeatedKeys::Hash::operator()(const PlanKey* key) const {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (int64_t extent : key->shape) mix(hash, static_cast<uint64_t>(extent));
  mix(hash, static_cast<uint64_t>(key->dtype));
  mix_sharding(hash, key->src);
  mix_sharding(hash, key->dst);
  mix(hash, static_cast<uint64_t>(key->topology.num_devices()));
  return static_cast<size_t>(hash);
}

std::optional<size_t> RepeatedKeys::first_of(const PlanKey& key, size_t index) {
  const auto [first, inserted] = first_.try_emplace(&key, index);
  if (inserted) return std::nullopt;
  return first->second;
}

}  // namespace reshard::plan_detail
