#include "pipelines/support/axis_groups.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace reshard::testing {

AxisGroups random_groups(std::vector<std::string> names, std::mt19937_64& rng) {
  std::shuffle(names.begin(), names.end(), rng);
  AxisGroups groups;
  for (const std::string& name : names) {
    if (groups.empty() || rng() % 2 == 0) {
      groups.push_back({name});
    } else {
      groups.back().push_back(name);
    }
  }
  return groups;
}

std::string rearrange_side(const AxisGroups& groups) {
  std::vector<std::string> dims;
  for (const auto& group : groups) {
    const std::string names = fmt::format("{}", fmt::join(group, " "));
    dims.push_back(group.size() > 1 ? fmt::format("({})", names) : names);
  }
  return fmt::format("{}", fmt::join(dims, " "));
}

Shape groups_shape(const AxisGroups& groups, const AxisSizes& sizes) {
  Shape shape;
  for (const auto& group : groups) {
    int64_t n = 1;
    for (const std::string& name : group) n *= sizes.at(name);
    shape.push_back(n);
  }
  return shape;
}

}  // namespace reshard::testing
