// Internal to the planner: which target device of a process receives a slice for the others.
#pragma once

#include <vector>

#include "chunk_pieces.h"
#include "reshard/layout/sharding.h"
#include "reshard/layout/topology.h"

namespace reshard::plan_detail {

// For every logical target device, the device that receives its slice's
// remote pieces in stage 0: the lowest-id target device of the same process
// holding the same slice (the device itself when it is that one). The others
// copy from it in stage 1, so each remote element crosses into a process once.
std::vector<DeviceId> stage0_receivers(const NamedSharding& dst, const Tiling& dst_tiling, const ChunkIndex& dst_index,
                                       const Topology& topology);

}  // namespace reshard::plan_detail
