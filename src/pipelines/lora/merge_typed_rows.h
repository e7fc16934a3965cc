// A LoRA merge's rows: W + left @ right * scaling from W's bytes in its dtype
// to the output's, rounded as the merge is defined.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "reshard/layout/dtype.h"

namespace reshard::pipelines_detail {

// Merged f32 rows at least this large are written around the cache, as
// memcpy writes large copies: a merge's output is written out (to a file, to
// its shard) before anything reads it, and a cached store reads each line
// from memory before it overwrites it.
constexpr size_t kStreamMergedBytes = size_t{1} << 20;

// W's rows (dense [rows, cols] in `w_dtype`) plus left @ right (left dense
// [rows, r], right dense [r, cols]) times `scaling`, each value rounded once
// to `w_dtype` (round to nearest even) and written as `out_dtype` into `out`
// (dense [rows, cols]). The sizes are the caller's to check. Rows go through
// a tile of f32 that stays in L1 where they are cast or streamed.
void merge_rows(std::span<const float> left, std::span<const float> right, int64_t r, float scaling, int64_t rows,
                int64_t cols, DType w_dtype, std::span<const std::byte> w, DType out_dtype, std::span<std::byte> out);

}  // namespace reshard::pipelines_detail
