// Finding two boxes that share an element, without comparing every pair.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <utility>

#include "reshard/layout/box.h"

namespace reshard::plan_detail {

// Indices (i < j) of two boxes of `boxes` that share at least one element, or
// nullopt when they are pairwise disjoint. Empty boxes overlap nothing. All
// boxes must have the same rank. A sweep along each dimension in turn, so a grid
// of k boxes costs O(k log k) rather than the O(k^2) of comparing every pair.
std::optional<std::pair<size_t, size_t>> find_overlap(std::span<const Box> boxes);

}  // namespace reshard::plan_detail
