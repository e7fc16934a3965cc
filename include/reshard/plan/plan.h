// Plan: the immutable list of transfers that builds a target layout from a source.
#pragma once

#include <cstdint>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/sharding.h"
#include "reshard/layout/topology.h"

namespace reshard {

// Copy `box` (global coordinates) from source device `src` to target device `dst`.
struct Transfer {
  DeviceId src = 0;
  DeviceId dst = 0;
  Box box;
  int stage = 0;
  bool operator==(const Transfer&) const = default;
};

// Byte counts of a plan (spec/cli.md `reshard plan --json`).
struct PlanStats {
  uint64_t bytes_total = 0;
  uint64_t bytes_same_device = 0;
  uint64_t bytes_same_process = 0;   // different devices, one process
  uint64_t bytes_cross_process = 0;
  uint64_t max_process_send_bytes = 0;  // most cross-process bytes any one process sends
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

class Plan {
 public:
  Plan(PlanKey key, std::vector<Transfer> transfers);

  const PlanKey& key() const { return key_; }
  const std::vector<Transfer>& transfers() const { return transfers_; }
  const PlanStats& stats() const { return stats_; }

  // Thorough check (XLA IFRT style): every element of every target device's
  // slice is covered by exactly one transfer, whose source holds it and whose
  // target is that device; no transfer is empty or outside the array.
  // Throws Error(kInvalidPlan) describing the first violation.
  void validate() const;

  bool operator==(const Plan& other) const { return key_ == other.key_ && transfers_ == other.transfers_; }

 private:
  PlanKey key_;
  std::vector<Transfer> transfers_;
  PlanStats stats_;
};

}  // namespace reshard
