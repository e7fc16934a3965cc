// Internal to the planner: which target device of a process receives a slice for the others.
#pragma once

#include <vector>

#include "chunk_pieces.h"
#include "reshard/layout/sharding.h"
#include "reshard/layout/topology.h"

namespace reshard::plan_detail {

// Whom a receiver receives for: the devices of its process, or of its host.
enum class ReceiverScope { kProcess, kHost };

// For every logical target device, the device that receives its slice's
// remote pieces in stage 0: the lowest-id target device of the same process
// (or host) holding the same slice (the device itself when it is that one).
// The others copy from it in stage 1 (or 2, from another process of the
// host), so each remote element crosses into a process (a host) once.
std::vector<DeviceId> stage0_receivers(const NamedSharding& dst, const Tiling& dst_tiling, const ChunkIndex& dst_index,
                                       const Topology& topology, ReceiverScope scope = ReceiverScope::kProcess);

}  // namespace reshard::plan_detail
