// Named axes grouped into dimensions, as the two sides of a rearrange rule
// ("a0 (a1 a2)"): random groupings for the randomized map tests, their text
// and their shape.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/pipelines/tensor_map.h"

namespace reshard::testing {

// `names` shuffled and cut into consecutive groups of random sizes.
AxisGroups random_groups(std::vector<std::string> names, std::mt19937_64& rng);

// The groups as one side of a rule: "a0 (a1 a2) a3".
std::string rearrange_side(const AxisGroups& groups);

// One dimension per group, the product of its axes' sizes.
Shape groups_shape(const AxisGroups& groups, const AxisSizes& sizes);

}  // namespace reshard::testing
