// Internal to the planner: which arrays of a batch repeat an earlier one's key.
#pragma once

#include <cstddef>
#include <optional>
#include <unordered_map>

#include "reshard/plan/plan.h"

namespace reshard::plan_detail {

// The first array of each distinct key of a batch. Keys are remembered by
// address (a batch's keys are not copied): they must outlive the index.
class RepeatedKeys {
 public:
  // The index of the first array whose key equals `key`, or nullopt when
  // `key` is the first of its kind (it is then remembered as array `index`).
  std::optional<size_t> first_of(const PlanKey& key, size_t index);

 private:
  // Cheaper than PlanKeyHash, which costs more than planning a repeat: one
  // multiply per device id, names left to the == that follows. Equal keys
  // hash equal.
  struct Hash {
    size_t operator()(const PlanKey* key) const;
  };
  struct Equal {
    bool operator()(const PlanKey* a, const PlanKey* b) const { return *a == *b; }
  };
  std::unordered_map<const PlanKey*, size_t, Hash, Equal> first_;
};

}  // namespace reshard::plan_detail
