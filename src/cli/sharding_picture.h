// A text picture of which devices hold which block of a 1-D or 2-D array, in
// the manner of jax.debug.visualize_array_sharding.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/topology.h"

namespace reshard::cli {

struct PictureStyle {
  bool color = false;  // an ANSI background colour per block: for terminals only
  int width = 80;      // columns the picture aims to fill (labels may widen it)
};

// One bordered block per distinct non-empty slice, sized in proportion to its
// extent and labelled with the ids of the devices that hold it ("CPU 0,4,8").
// `boxes[i]` is the slice of `devices[i]`. nullopt when there is no sensible
// picture: a rank other than 1 or 2, an empty array, or too many blocks.
std::optional<std::string> draw_sharding(const Shape& shape, const std::vector<Box>& boxes,
                                         const std::vector<DeviceId>& devices, const PictureStyle& style);

}  // namespace reshard::cli
