// Brute-force answers to check the planner against, sharing none of its code.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reshard/plan/plan.h"

namespace reshard::testing {

// Calls visit(index) for every index inside `box`, in row-major order (once
// for a scalar's box, never for an empty one).
template <typename Visit>
void for_each_index(const Box& box, Visit&& visit) {
  if (box.empty()) return;
  std::vector<int64_t> index = box.origin();
  while (true) {
    visit(index);
    size_t d = box.rank();
    while (d > 0) {
      --d;
      if (++index[d] < box.origin()[d] + box.shape()[d]) break;
      index[d] = box.origin()[d];
      if (d == 0) return;
    }
    if (box.rank() == 0) return;
  }
}

// The transfers the replica rule asks for, found the slow obvious way: every
// target device's slice intersected with every distinct source slice, pieces
// sorted by origin, each sent by the target itself if it holds it, else the
// lowest device of its process that does, else the lowest device of the
// remote holder process that has sent least so far (lowest process on ties).
std::vector<Transfer> reference_transfers(const PlanKey& key);

// The fewest cross-process bytes any plan can move, counted element by
// element: every element of every target slice that no source device of the
// target's own process holds must cross. Small shapes only.
uint64_t minimum_cross_process_bytes(const PlanKey& key);

// Per process p, the fewest bytes any plan must bring into p from other
// processes, counted element by element: the elements of the union of p's
// target slices that no source device of p holds. Small shapes only.
std::vector<uint64_t> minimum_bytes_into_each_process(const PlanKey& key);

// The same per host (the topology's hosts): what no source device of the
// host holds, of the union of its target slices. Small shapes only.
std::vector<uint64_t> minimum_bytes_into_each_host(const PlanKey& key);

// Element by element, with gtest expectations: every target device receives
// each element of its slice exactly once; a stage-1 source is in its target's
// process, a stage-2 source in another process of its host, and either
// received every element of its box in stage 0 (no chains). Independent of
// Plan::validate().
void expect_exact_cover_by_elements(const Plan& plan);

// What the largest sender can achieve over one batch of small keys, found by
// brute force: every element some process needs from others is demanded once
// per process, from the set of processes holding it. `least_max_send` is the
// smallest possible largest load (Hall's condition: over every set S of
// holder processes, the bytes only S can send, shared evenly); `rounding` is
// what cutting pieces at whole rows may add to it (two of the largest row of
// any shared piece per set of holders). `shared_bytes` is the demand that more
// than one process could send.
struct SendBound {
  uint64_t least_max_send = 0;
  uint64_t rounding = 0;
  uint64_t shared_bytes = 0;
  bool known = false;  // false when too many processes share pieces to try every set
};
SendBound sender_bound(std::span<const PlanKey> keys);

}  // namespace reshard::testing
