#include "reshard/plan/plan_cache.h"

#include <functional>
#include <string>

#include "reshard/plan/planner.h"

namespace reshard {
namespace {

// boost::hash_combine's mixing step.
void mix(size_t& seed, size_t value) { seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

template <typename T>
void mix_value(size_t& seed, const T& value) {
  mix(seed, std::hash<T>{}(value));
}

void mix_sharding(size_t& seed, const NamedSharding& sharding) {
  for (const MeshAxis& axis : sharding.mesh().axes()) {
    mix_value(seed, axis.name);
    mix_value(seed, axis.size);
  }
  for (DeviceId d : sharding.mesh().devices()) mix_value(seed, d);
  const std::vector<SpecEntry>& entries = sharding.spec().entries();
  size_t used = entries.size();
  while (used > 0 && entries[used - 1].empty()) --used;  // P('x') == P('x', None)
  for (size_t i = 0; i < used; ++i) {
    mix_value(seed, entries[i].size());
    for (const std::string& axis : entries[i]) mix_value(seed, axis);
  }
  mix_value(seed, static_cast<int>(sharding.memory_kind()));
  mix_value(seed, sharding.uneven());
}

}  // namespace

size_t PlanKeyHash::operator()(const PlanKey& key) const {
  size_t seed = key.shape.size();
  for (int64_t extent : key.shape) mix_value(seed, extent);
  mix_value(seed, static_cast<int>(key.dtype));
  mix_sharding(seed, key.src);
  mix_sharding(seed, key.dst);
  mix_value(seed, key.topology.num_devices());
  mix_value(seed, key.topology.num_processes());
  return seed;
}

std::shared_ptr<const Plan> PlanCache::get(const PlanKey& key) {
  {
    std::lock_guard lock(mutex_);
    if (const auto it = plans_.find(key); it != plans_.end()) return it->second;
  }
  // Plan outside the lock: other keys need not wait for a large plan.
  auto plan = std::make_shared<const Plan>(make_plan(key));
  std::lock_guard lock(mutex_);
  return plans_.try_emplace(key, std::move(plan)).first->second;
}

size_t PlanCache::size() const {
  std::lock_guard lock(mutex_);
  return plans_.size();
}

void PlanCache::clear() {
  std::lock_guard lock(mutex_);
  plans_.clear();
}

PlanCache& default_plan_cache() {
  static PlanCache cache;
  return cache;
}

}  // namespace reshard
