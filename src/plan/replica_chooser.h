// Internal to the planner: which source replica sends a piece to a target device.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "chunk_pieces.h"
#include "reshard/layout/sharding.h"
#include "reshard/layout/topology.h"

namespace reshard::plan_detail {

// Applies the rule of spec/sharding.md: the target device itself, then a
// device of the target's process, then the remote process that has sent the
// fewest bytes so far. Stateful (it counts what each process sent), so pieces
// must be offered in the plan's deterministic order.
class ReplicaChooser {
 public:
  ReplicaChooser(const NamedSharding& src, const Tiling& src_tiling, const ChunkIndex& src_index,
                 const Topology& topology);

  // The source device that sends `bytes` of source chunk tuple `src_chunk` to
  // device `dst` of process `dst_process`.
  DeviceId choose(int64_t src_chunk, DeviceId dst, int dst_process, uint64_t bytes);

 private:
  using ProcessHolder = std::pair<int, DeviceId>;  // a process and its lowest device holding a chunk

  // Flat, grouped by source chunk tuple (one allocation, not one per chunk):
  // entries [begin[c], begin[c + 1]) belong to chunk tuple c.
  std::span<const DeviceId> devices_holding(int64_t chunk) const;
  std::span<const ProcessHolder> processes_holding(int64_t chunk) const;

  std::vector<DeviceId> devices_;             // ascending within a chunk
  std::vector<size_t> devices_begin_;
  std::vector<ProcessHolder> processes_;      // ascending by process within a chunk
  std::vector<size_t> processes_begin_;
  std::vector<uint64_t> sent_;                // cross-process bytes sent so far, by process
};

}  // namespace reshard::plan_detail
