// A text picture of which devices hold which block of an array of any rank, in
// the manner of jax.debug.visualize_array_sharding.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/topology.h"

namespace reshard {

struct PictureStyle {
  bool color = false;  // an ANSI background colour per block: for terminals only
  int width = 80;      // columns the picture aims to fill, 1 to 1000 (labels may widen it)
  // What each device is called, indexed by reshard's device id: a JAX job's
  // own ids ("2048") where they differ from reshard's dense ones. Empty: the ids.
  std::vector<std::string> labels{};
  std::string platform = "CPU";  // the word before a block's first label, as JAX's "CPU 0,1"; may be empty
  std::string dtype{};           // named in the caption when given ("bf16")
};

// One bordered block per distinct non-empty slice, sized in proportion to its
// extent and labelled with the devices that hold it ("CPU 0,4,8"), in
// increasing device id. `boxes[i]` is the slice of `devices[i]`.
//
// Rank 1 and 2 are drawn exactly as JAX draws them: a row of blocks, or a grid
// of dimension 0 down by dimension 1 across in the array's aspect. Any other
// rank draws only the dimensions that are split into more than one slice, and
// a caption line first names the shape and every dimension:
//   [32, 8, 4096] bf16: dim 0 (32) whole; rows: dim 1 split 2, columns: dim 2 split 4
// None split (a scalar, or a replicated array): one block. One: a row of
// blocks. Two: a grid. More: the last two split dimensions are the grid, as
// numpy prints a matrix, and the leading split dimensions get one grid each,
// headed by their slice ("dim 0 [0:16]").
//
// nullopt when there is no sensible picture: an empty array, more than 32
// blocks along a side or more than 16 grids. Throws Error(kInvalidArgument),
// naming the argument, for boxes that do not match `shape` or `devices`, a
// device with no label, a label that is empty or not printable ASCII, or a
// width out of range.
std::optional<std::string> draw_sharding(const Shape& shape, const std::vector<Box>& boxes,
                                         const std::vector<DeviceId>& devices, const PictureStyle& style);

}  // namespace reshard
