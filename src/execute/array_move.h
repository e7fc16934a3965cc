// ArrayMove: one array of a batched execute, as the executor's parts see it.
#pragma once

#include "reshard/execute/sharded_array.h"
#include "reshard/plan/plan.h"

namespace reshard::execute_detail {

// The plan of one array and this process's source and target arrays for it.
struct ArrayMove {
  const Plan* plan = nullptr;
  const ShardedArray* src = nullptr;
  ShardedArray* dst = nullptr;
};

}  // namespace reshard::execute_detail
