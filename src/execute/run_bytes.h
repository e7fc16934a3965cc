// The bytes a list of runs (ConstByteRun or ByteRun) holds in all, and rows listed as runs.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "reshard/layout/byte_run.h"

namespace reshard::execute_detail {

// Runs describe memory that exists, so their sum cannot overflow size_t.
template <typename Run>
size_t total_bytes(std::span<const Run> runs) {
  size_t bytes = 0;
  for (const Run& run : runs) bytes += run.size;
  return bytes;
}

// The runs of `rows`, in order, for what takes a run list.
std::vector<ConstByteRun> runs_of(std::span<const ConstRunRows> rows);
std::vector<ByteRun> runs_of(std::span<const RunRows> rows);

// The bytes rows of memory that exists hold (no overflow, as above).
template <typename Rows>
size_t total_row_bytes(std::span<const Rows> rows) {
  size_t bytes = 0;
  for (const Rows& r : rows) bytes += static_cast<size_t>(r.size * r.count);
  return bytes;
}

}  // namespace reshard::execute_detail
