// Test helpers for the plan layer: layouts from short strings, and random layouts.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "reshard/plan/plan.h"

namespace reshard::testing {

// A sharding from the CLI's notation: sharding("data=4,model=4", {0,4,...}, "data,None").
// An empty device list means 0..n-1.
NamedSharding sharding(const std::string& mesh, const std::vector<DeviceId>& devices, const std::string& spec,
                       bool uneven = false, MemoryKind kind = MemoryKind::kDevice);

// A random plan key on a small job (at most 16 devices, a few thousand
// elements): random meshes of 1 to 4 axes, random device subsets and orders
// (sometimes disjoint, sometimes 0..n-1), random specs with tuples and
// replication, even or uneven, any memory kinds, and a whole-byte dtype.
PlanKey random_plan_key(std::mt19937_64& rng);

// A random key whose target replicates slices over several devices of each
// process (a `device` mesh axis inside processes, as in the seed's
// Mesh(devices.reshape(process_count, -1), ('process', 'device'))), from a
// random source: the case where each element should cross into a process once.
PlanKey random_fan_out_key(std::mt19937_64& rng);

// A random key whose source replicates every slice over several processes
// and whose target lives on other processes: the case where senders share.
PlanKey random_shared_source_key(std::mt19937_64& rng);

// "f32[4, 6]: NamedSharding(...) -> NamedSharding(...), 8 devices / 2 processes", for failure messages.
std::string describe(const PlanKey& key);

}  // namespace reshard::testing
