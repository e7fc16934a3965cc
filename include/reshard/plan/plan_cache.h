// A thread-safe cache of plans, so repeated (shape, source, target) triples plan once.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "reshard/plan/plan.h"

namespace reshard {

// A hash of every field PlanKey's operator== compares (specs hashed as JAX
// compares them, without trailing Nones).
struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const;
};

class PlanCache {
 public:
  // The plan for `key`, made by make_plan on first use and shared afterwards.
  // Safe to call from many threads; two threads missing the same key at once
  // may both plan it, but both get the one plan that was stored first. Errors
  // from planning propagate and nothing is stored.
  std::shared_ptr<const Plan> get(const PlanKey& key);

  // Number of distinct keys stored.
  size_t size() const;

  // Drops every stored plan (plans already handed out stay valid).
  void clear();

 private:
  mutable std::mutex mutex_;
  std::unordered_map<PlanKey, std::shared_ptr<const Plan>, PlanKeyHash> plans_;
};

// The process-wide cache that reshard's operations use.
PlanCache& default_plan_cache();

}  // namespace reshard
