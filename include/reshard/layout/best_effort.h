// Best-effort sharding for loading big tensors (Levanter's rules).
#pragma once

#include <string_view>

#include "reshard/layout/sharding.h"

namespace reshard {

// With a mesh and a preferred axis: shard the last dimension divisible by that
// axis's size over it; replicate when none is. Throws kUnknownAxis.
NamedSharding best_effort_sharding(const Shape& shape, const Mesh& mesh, std::string_view axis);

// Without a mesh: walking dimensions last to first, give dimension k
// gcd(shape[k], devices still unassigned) devices. Builds a mesh over
// `devices` (in the given order) with one axis "d<k>" per split dimension and
// a leading "replica" axis for devices left over.
NamedSharding best_effort_sharding(const Shape& shape, const std::vector<DeviceId>& devices);

}  // namespace reshard
