#include "reshard/plan/plan_cache.h"

#include <algorithm>
#include <functional>
#include <iterator>
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

namespace {

size_t hash_of(std::span<const PlanKey> keys) {
  size_t seed = keys.size();
  for (const PlanKey& key : keys) mix(seed, PlanKeyHash{}(key));
  return seed;
}

}  // namespace

PlanCache::PlanCache(size_t max_entries) : max_entries_(max_entries) {}

std::shared_ptr<const std::vector<Plan>> PlanCache::find_locked(size_t hash, std::span<const PlanKey> keys) {
  const auto [first, last] = by_hash_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const Entries::iterator entry = it->second;
    if (std::equal(entry->keys.begin(), entry->keys.end(), keys.begin(), keys.end())) {
      entries_.splice(entries_.begin(), entries_, entry);  // now the most recently used
      return entry->plans;
    }
  }
  return nullptr;
}

std::shared_ptr<const std::vector<Plan>> PlanCache::get_batch(std::span<const PlanKey> keys) {
  const size_t hash = hash_of(keys);
  {
    std::lock_guard lock(mutex_);
    if (auto found = find_locked(hash, keys)) return found;
  }
  // Plan outside the lock: other keys need not wait for a large plan.
  auto plans = std::make_shared<const std::vector<Plan>>(make_plans(keys));
  std::lock_guard lock(mutex_);
  if (auto found = find_locked(hash, keys)) return found;  // another thread stored it first
  if (max_entries_ == 0) return plans;
  entries_.push_front(Entry{hash, std::vector<PlanKey>(keys.begin(), keys.end()), plans});
  by_hash_.emplace(hash, entries_.begin());
  if (entries_.size() > max_entries_) {
    const Entries::iterator oldest = std::prev(entries_.end());
    const auto [first, last] = by_hash_.equal_range(oldest->hash);
    for (auto it = first; it != last; ++it) {
      if (it->second == oldest) {
        by_hash_.erase(it);
        break;
      }
    }
    entries_.pop_back();
  }
  return plans;
}

std::shared_ptr<const Plan> PlanCache::get(const PlanKey& key) {
  std::shared_ptr<const std::vector<Plan>> batch = get_batch(std::span(&key, 1));
  const Plan* plan = &batch->front();
  return std::shared_ptr<const Plan>(std::move(batch), plan);  // keeps the batch alive
}

size_t PlanCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

void PlanCache::clear() {
  std::lock_guard lock(mutex_);
  by_hash_.clear();
  entries_.clear();
}

PlanCache& default_plan_cache() {
  static PlanCache cache;
  return cache;
}

}  // namespace reshard
