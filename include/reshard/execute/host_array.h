// Whole arrays in one process's host memory, row-major: owned, or viewed.
#pragma once

#include <cstddef>
#include <span>

#include "reshard/execute/buffer.h"
#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"

namespace reshard {

// A read-only view of a whole array's bytes in row-major order.
struct HostView {
  Shape shape;
  DType dtype = DType::kF32;
  std::span<const std::byte> bytes;
};

// A whole array owned in host memory (its buffer may be shared by copies).
struct HostArray {
  Shape shape;
  DType dtype = DType::kF32;
  Buffer buffer;

  HostView view() const { return HostView{shape, dtype, buffer.bytes()}; }
};

}  // namespace reshard
