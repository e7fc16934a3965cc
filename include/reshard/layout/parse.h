// Parsing of the command line's layout flags: meshes, device lists, shapes, sizes.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/mesh.h"

namespace reshard {

// "data=2,model=8" -> axes. Names are letters, digits, '_', '-' and '.' (what
// a partition spec can name), not None or _. Throws Error(kParse) naming the bad part.
std::vector<MeshAxis> parse_mesh_axes(std::string_view text);

// "0,4,8,12" -> ids (non-negative). Throws Error(kParse) naming the bad entry.
std::vector<DeviceId> parse_device_list(std::string_view text);

// "32,8,4096" -> shape (non-negative; "" is a scalar). Throws Error(kParse).
Shape parse_shape(std::string_view text);

// "5GB", "500MB", "1.5GiB", "1024" -> bytes (decimal units powers of 10,
// binary units powers of 2). Throws Error(kParse).
uint64_t parse_byte_size(std::string_view text);

// A non-negative decimal integer that fits int64; `what` names it in errors.
int64_t parse_count(std::string_view text, std::string_view what);

}  // namespace reshard
