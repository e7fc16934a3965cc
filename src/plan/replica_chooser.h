// Internal to the planner: which source replica sends a piece to a target device.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <compare>
#include <vector>

#include "chunk_pieces.h"
#include "reshard/layout/sharding.h"
#include "reshard/layout/topology.h"

namespace reshard::plan_detail {

// Picks the source of a replicated piece: the target device itself, then a
// device of the target's process, then a remote process. Which remote process
// is the planner's choice (sender balancing); least_loaded() is the simple
// per-plan rule, stateful (it counts what each process sent), so pieces must
// be offered to it in the plan's deterministic order.
class ReplicaChooser {
 public:
  // A process holding a chunk, and its lowest device that holds it. Ordered by
  // process, then device (so a sorted run's first entry per process is its lowest).
  struct ProcessHolder {
    int process = 0;
    DeviceId device = 0;
    friend auto operator<=>(const ProcessHolder&, const ProcessHolder&) = default;
  };

  ReplicaChooser(const NamedSharding& src, const Tiling& src_tiling, const ChunkIndex& src_index,
                 const Topology& topology);

  // The source device of `dst_process` that gives source chunk tuple
  // `src_chunk` to device `dst`: `dst` itself if it holds it, else the lowest
  // device of the process that does; nullopt when the process holds none.
  std::optional<DeviceId> local(int64_t src_chunk, DeviceId dst, int dst_process) const;

  // How many source chunk tuples there are.
  size_t num_chunks() const { return processes_begin_.size() - 1; }

  // The processes holding `chunk`, ascending, each with its lowest device.
  std::span<const ProcessHolder> processes_holding(int64_t chunk) const;

  // The lowest device of the holder process that has sent the fewest bytes so
  // far (lowest process on ties), counting `bytes` against it.
  DeviceId least_loaded(int64_t src_chunk, uint64_t bytes);

  // local(), else least_loaded(): the per-device rule of one plan.
  DeviceId choose(int64_t src_chunk, DeviceId dst, int dst_process, uint64_t bytes);

 private:
  // Flat, grouped by source chunk tuple (one allocation, not one per chunk):
  // entries [begin[c], begin[c + 1]) belong to chunk tuple c.
  std::span<const DeviceId> devices_holding(int64_t chunk) const;

  std::vector<DeviceId> devices_;             // ascending within a chunk
  std::vector<size_t> devices_begin_;
  std::vector<ProcessHolder> processes_;      // ascending by process within a chunk
  std::vector<size_t> processes_begin_;
  std::vector<uint64_t> sent_;                // cross-process bytes sent so far, by process
};

}  // namespace reshard::plan_detail
