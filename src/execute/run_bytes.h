// The bytes a list of runs (ConstByteRun or ByteRun) holds in all.
#pragma once

#include <cstddef>
#include <span>

namespace reshard {

// Runs describe memory that exists, so their sum cannot overflow size_t.
template <typename Run>
size_t total_bytes(std::span<const Run> runs) {
  size_t bytes = 0;
  for (const Run& run : runs) bytes += run.size;
  return bytes;
}

}  // namespace reshard
