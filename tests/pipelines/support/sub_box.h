// The bytes of one box of a row-major tensor, gathered element by element:
// the plain reference the copy and import tests compare shards against.
#pragma once

#include <cstddef>
#include <vector>

#include "reshard/layout/box.h"

namespace reshard::testing {

// `box` of `whole`, a row-major tensor of `shape` with `element`-byte elements.
std::vector<std::byte> sub_box(const std::vector<std::byte>& whole, const Shape& shape, const Box& box, size_t element);

}  // namespace reshard::testing
