// The arithmetic of PEFT's merges that merge-lora and export share: DoRA's
// per-output-feature scale, and rounding merged f32 values once to W's dtype.
// Blocks are row ranges of a 2-D weight, dense and row-major in f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "reshard/layout/dtype.h"

namespace reshard::pipelines_detail {

// A block of rows [row, row + rows) of a [*, cols] weight, as f32 values.
struct F32Rows {
  std::span<float> values;  // rows * cols
  int64_t row = 0;
  int64_t rows = 0;
  int64_t cols = 0;
};

// Adds each value's square (in f64) to `squares` at its output feature: its
// row, or its column when `transposed` (fan_in_fan_out, embeddings).
void add_squares(const F32Rows& block, bool transposed, std::span<double> squares);

// DoRA's scale per output feature o, as PEFT's merge computes it:
// magnitude[o] / ||W + ΔW||_o, the norm rounded to f32, an f32 division.
std::vector<float> dora_scales(std::span<const float> magnitude, std::span<const double> squares);

// Multiplies each value by its output feature's scale (as add_squares picks it).
void apply_scales(F32Rows block, bool transposed, std::span<const float> scales);

// lora_bias: each bias value plus scaling times lora_B's bias, in f32.
void add_lora_bias(std::span<float> bias, std::span<const float> lora_bias, float scaling);

// `values` rounded to `w_dtype` (round to nearest even), then written as
// `out_dtype` into `out`, which holds exactly that many values of it.
void round_and_cast(std::span<const float> values, DType w_dtype, DType out_dtype, std::span<std::byte> out);

// The same, the values rounded to `w_dtype` held in `scratch` (grown as
// needed) where they must be cast again: a caller that casts row after row
// allocates once.
void round_and_cast(std::span<const float> values, DType w_dtype, DType out_dtype, std::span<std::byte> out,
                    std::vector<std::byte>& scratch);

}  // namespace reshard::pipelines_detail
