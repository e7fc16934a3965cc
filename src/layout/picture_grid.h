// The drawing under draw_sharding: bordered blocks in rows and columns, sized
// in proportion and labelled, as jax.debug.visualize_array_sharding draws them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/sharding_picture.h"

namespace reshard::layout_detail {

// The picture's two axes: the distinct slices down and across, in order, and
// the extents they divide.
struct GridAxes {
  std::vector<Interval> rows{{0, 1}};
  std::vector<Interval> cols{{0, 1}};
  int64_t row_extent = 1;
  int64_t col_extent = 1;
  // A 2-D array keeps its aspect (10 lines tall); a 1-D one is a single line of blocks.
  bool two_d = false;
};

// The labels of the devices holding each block, keyed (row, column), in order.
using GridCells = std::map<std::pair<size_t, size_t>, std::vector<std::string>>;

// One picture per entry of `panels`, all with the same block widths and
// heights so that they line up when printed one under another.
std::vector<std::string> draw_grids(const GridAxes& axes, const std::vector<GridCells>& panels,
                                    const PictureStyle& style);

}  // namespace reshard::layout_detail
