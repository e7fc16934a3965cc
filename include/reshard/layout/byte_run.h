// ByteRun, ConstByteRun: a run of bytes in memory, as a box copy walks them and
// a transport's messages gather and scatter them. RunRows, ConstRunRows: many
// such runs of one size at even steps, the rows of a strided box in one word.
#pragma once

#include <cstddef>
#include <cstdint>

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

// `count` runs of `size` bytes, the i-th at data + i * stride, in that order.
// A message of a million 256-byte rows of a shard is a few of these.
struct ConstRunRows {
  const std::byte* data = nullptr;
  uint64_t size = 0;
  int64_t stride = 0;
  uint64_t count = 0;
};
struct RunRows {
  std::byte* data = nullptr;
  uint64_t size = 0;
  int64_t stride = 0;
  uint64_t count = 0;
};

}  // namespace reshard
