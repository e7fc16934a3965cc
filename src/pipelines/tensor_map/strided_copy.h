// One strided copy between two buffers, with the cast fused into it: how a
// map's transposes, unstacks, merges and casts move bytes, in a single pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"

namespace reshard::pipelines_detail {

// Element [i0, i1, ...] of the walk `shape` is read at src_offset + sum(i * src_strides)
// and written at dst_offset + sum(i * dst_strides), all in elements of each side's dtype.
struct StridedCopy {
  Shape shape;
  std::vector<int64_t> src_strides;
  std::vector<int64_t> dst_strides;
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
  DType src_dtype = DType::kF32;
  DType dst_dtype = DType::kF32;
};

// Runs the copy. Equal dtypes copy bytes (contiguous runs by memcpy); between
// F32, F16 and BF16 each element is converted on the way (round to nearest
// even). Axes are merged where both sides allow, and a transpose is walked in
// tiles. Error(kInvalidArgument) for any other pair of dtypes or a sub-byte dtype.
void run_strided_copy(const StridedCopy& copy, const std::byte* src, std::byte* dst);

}  // namespace reshard::pipelines_detail
