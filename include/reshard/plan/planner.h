// The planner: which source replica sends which box to which target device.
#pragma once

#include "reshard/plan/plan.h"

namespace reshard {

// The plan that builds every target device's slice of `key.shape` from the
// source layout. Each target element is fetched exactly once, from a source
// device holding it chosen in this order: the target device itself, the lowest
// id of its own process, else the remote process that has sent the fewest
// bytes so far (lowest process id on ties; its lowest device id). So the
// cross-process bytes are the fewest possible, and every process, given the
// same key, computes the same plan without talking.
//
// Transfers come in target mesh order, then box order (row-major by origin); a
// transfer with src == dst is a copy within one device (or between its memory
// kinds). Work grows with the pieces that move, not with devices squared: the
// overlaps are found per dimension by interval search.
//
// Throws the sharding errors of spec/sharding.md when a layout does not fit
// the shape, and Error(kUnknownDevice) for a mesh device outside the topology.
Plan make_plan(const PlanKey& key);

}  // namespace reshard
