// Brute-force answers to check the planner against, sharing none of its code.
#pragma once

#include <cstdint>
#include <vector>

#include "reshard/plan/plan.h"

namespace reshard::testing {

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

}  // namespace reshard::testing
