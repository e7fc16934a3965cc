// ByteRun, ConstByteRun: a run of bytes in memory, as a box copy walks them and
// a transport's messages gather and scatter them.
#pragma once

#include <cstddef>

namespace reshard {

// `size` bytes from `data`: one run of a message, whose bytes are its runs'
// bytes concatenated in order.
struct ConstByteRun {
  const std::byte* data = nullptr;
  size_t size = 0;
};
struct ByteRun {
  std::byte* data = nullptr;
  size_t size = 0;
};

}  // namespace reshard
