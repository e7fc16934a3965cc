// Which of an array's dimensions draw_sharding draws, and the caption that
// names them all.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reshard/layout/box.h"

namespace reshard::layout_detail {

// The distinct non-empty slices of each dimension that `boxes` hold, in order.
std::vector<std::vector<Interval>> slices_per_dim(const Shape& shape, const std::vector<Box>& boxes);

// The dimensions shown down (rows) and across (columns) each grid, and those
// given a grid per slice (panels). A dimension in none of them is whole.
struct DrawnDims {
  std::vector<size_t> panels{};
  std::optional<size_t> rows{}, cols{};
  bool two_d = false;  // keep the aspect of (rows, cols)
};

// Rank 1 and 2 as JAX draws them (every dimension, split or not); any other
// rank: the split dimensions only, the last two as the grid.
DrawnDims choose_dims(const Shape& shape, const std::vector<std::vector<Interval>>& slices);

// "[32, 8, 4096] bf16: dim 0 (32) whole; rows: dim 1 split 2, columns: dim 2 split 4".
std::string caption(const Shape& shape, const std::vector<std::vector<Interval>>& slices, const DrawnDims& dims,
                    const std::string& dtype);

// A panel's heading: "dim 0 [0:16]" or "dim 0 [0:16], dim 1 [4:8]".
std::string panel_heading(const std::vector<size_t>& dims, const std::vector<Interval>& slices);

}  // namespace reshard::layout_detail
