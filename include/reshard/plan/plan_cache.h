// A thread-safe, bounded cache of plans, so repeated (shape, source, target) triples plan once.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "reshard/plan/plan.h"

namespace reshard {

// A hash of every field PlanKey's operator== compares (specs hashed as JAX
// compares them, without trailing Nones).
struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const;
};

class PlanCache {
 public:
  // Keeps at most `max_entries` entries (a plan, or a batch's plans), dropping
  // the least recently used; 0 keeps nothing.
  explicit PlanCache(size_t max_entries = 1024);

  // The plan for `key`, made by make_plan on first use and shared afterwards.
  // Safe to call from many threads; two threads missing the same key at once
  // may both plan it, but both get the one plan that was stored first. Errors
  // from planning propagate and nothing is stored. The same entry as
  // get_batch() of the one key.
  std::shared_ptr<const Plan> get(const PlanKey& key);

  // The plans of one operation over `keys` (make_plans, senders balanced over
  // the batch), stored as one entry keyed by the whole key list, in order.
  std::shared_ptr<const std::vector<Plan>> get_batch(std::span<const PlanKey> keys);

  // Number of entries stored.
  size_t size() const;
  size_t max_entries() const { return max_entries_; }

  // Drops every stored plan (plans already handed out stay valid).
  void clear();

 private:
  struct Entry {
    size_t hash = 0;
    std::vector<PlanKey> keys;
    std::shared_ptr<const std::vector<Plan>> plans;
  };
  using Entries = std::list<Entry>;  // most recently used first

  std::shared_ptr<const std::vector<Plan>> find_locked(size_t hash, std::span<const PlanKey> keys);

  const size_t max_entries_;
  mutable std::mutex mutex_;
  Entries entries_;
  std::unordered_multimap<size_t, Entries::iterator> by_hash_;
};

// The process-wide cache that reshard's operations use (1024 entries).
PlanCache& default_plan_cache();

}  // namespace reshard
