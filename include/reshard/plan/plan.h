// Plan: the immutable list of transfers that builds a target layout from a source.
#pragma once

#include <cstdint>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/sharding.h"
#include "reshard/layout/topology.h"

namespace reshard {

// Copy `box` (global coordinates) to target device `dst`. Stage 0: from source
// device `src`, which holds the box in the source layout. Stage 1 (after all of
// stage 0): a copy inside one process from `src`, a target-layout device of
// `dst`'s process whose stage-0 transfers cover the box, so that an element
// several devices of a process need crosses into that process once. Stage 2
// (after stage 1, only where the topology puts several processes on a host):
// a copy between two processes of one host from `src`, a target-layout device
// whose stage-0 transfers cover the box, so that an element several processes
// of a host need crosses into that host once.
struct Transfer {
  DeviceId src = 0;
  DeviceId dst = 0;
  Box box;
  int stage = 0;
  bool operator==(const Transfer&) const = default;
};

// Byte counts of a plan (what `reshard plan --json` prints). The same-device,
// same-process and cross-process counts split the stage-0 bytes only.
struct PlanStats {
  uint64_t bytes_total = 0;
  uint64_t bytes_same_device = 0;
  uint64_t bytes_same_process = 0;   // different devices, one process
  uint64_t bytes_cross_process = 0;
  uint64_t max_process_send_bytes = 0;  // most cross-process bytes any one process sends
  uint64_t bytes_fan_out = 0;           // stage-1 copies
  uint64_t bytes_cross_host = 0;        // the stage-0 cross-process bytes between hosts
  uint64_t bytes_host_relay = 0;        // stage-2 copies
  bool operator==(const PlanStats&) const = default;
};

// What a plan moves between: the array and both layouts, in one topology.
struct PlanKey {
  Shape shape;
  DType dtype = DType::kF32;
  NamedSharding src;
  NamedSharding dst;
  Topology topology;
  bool operator==(const PlanKey&) const = default;
};

// The fewest bytes that must cross into each host (index: host) for any plan
// of `key`: the union of the host's target slices less what its own source
// devices hold. Computed from the layouts alone, sharing nothing with the
// planner, whose stats().bytes_cross_host (with the default options) equals
// their sum. Throws the sharding errors of Sharding::validate.
std::vector<uint64_t> min_bytes_into_hosts(const PlanKey& key);

class Plan {
 public:
  Plan(PlanKey key, std::vector<Transfer> transfers);

  const PlanKey& key() const { return key_; }
  // All stage-0 transfers first, then all stage-1 transfers, then all stage-2 ones.
  const std::vector<Transfer>& transfers() const { return transfers_; }
  const PlanStats& stats() const { return stats_; }
  // A hash of the key's shape and dtype and of every transfer (devices,
  // stage, box), made once: what processes compare to agree that they run
  // the same plans. Equal plans have equal digests.
  uint64_t digest() const { return digest_; }

  // Thorough check (XLA IFRT style): every element of every target device's
  // slice is covered by exactly one transfer into that device; a stage-0
  // source holds its box; a stage-1 source is a target device of the same
  // process, a stage-2 source one of another process of the same host, whose
  // stage-0 transfers cover the box; stages come in order; no transfer is
  // empty or outside the array.
  // Throws Error(kInvalidPlan) describing the first violation.
  void validate() const;

  bool operator==(const Plan& other) const { return key_ == other.key_ && transfers_ == other.transfers_; }

 private:
  PlanKey key_;
  std::vector<Transfer> transfers_;
  PlanStats stats_;
  uint64_t digest_ = 0;
};

}  // namespace reshard
