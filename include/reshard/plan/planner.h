// The planner: which source replica sends which box to which target device.
#pragma once

#include <span>
#include <vector>

#include "reshard/plan/plan.h"

namespace reshard {

// How the planner may go beyond each target device fetching its own slice.
// Both false is the per-device plan (each target device fetches every remote
// piece itself, from the least-loaded holder of one plan): a baseline.
struct PlanOptions {
  // Stage 1: a remote piece that several devices of one process need crosses
  // into the process once, to its lowest-id device needing it; the others
  // copy it from there.
  bool fan_out = true;
  // A remote piece that several processes hold is split (along its outermost
  // dimension longer than 1) over them so that the largest number of bytes any
  // process sends, over all arrays of one make_plans call, is the smallest
  // possible (to a row).
  bool balance_senders = true;
};

// The plans that build every target device's slice of each key's array from
// its source layout, as one operation. Each target element is fetched from a
// source device holding it chosen in this order: the target device itself,
// the lowest id of its own process, else a remote process (see PlanOptions;
// the lowest device of that process holding it). With the default options,
// for every process p the bytes that cross into p are the fewest possible:
// the bytes of (the union of p's target slices) minus (the union of p's
// source slices). Every process, given the same keys and options, computes the
// same plans without talking.
//
// Stage-0 transfers come in target mesh order, then box order (row-major by
// origin, a split piece's parts in order); stage-1 transfers follow in the
// same order, then stage-2 transfers (the host relays of Transfer's comment),
// where the topology puts several processes on a host. A transfer with src == dst is a copy within one device (or
// between its memory kinds). Work grows with the pieces that move, not with
// devices squared: the overlaps are found per dimension by interval search,
// and an array whose key equals an earlier one's in the batch (a model's
// layers) copies that plan, only its shared pieces' senders settled anew.
//
// Throws the sharding errors of Sharding::validate when a layout does not fit
// its shape (naming the key's index when there are several), and
// Error(kUnknownDevice) for a mesh device outside the topology.
std::vector<Plan> make_plans(std::span<const PlanKey> keys, const PlanOptions& options = {});

// The batch of one.
Plan make_plan(const PlanKey& key, const PlanOptions& options = {});

}  // namespace reshard
