#include "pipelines/lora/dora_and_rounding.h"

#include <cmath>
#include <cstddef>

#include "layout/float_convert.h"

namespace reshard::pipelines_detail {

using layout_detail::convert_floats;

namespace {

size_t feature_of(const F32Rows& block, bool transposed, size_t i, size_t j) {
  return transposed ? j : static_cast<size_t>(block.row) + i;
}

}  // namespace

void add_squares(const F32Rows& block, bool transposed, std::span<double> squares) {
  const auto cols = static_cast<size_t>(block.cols);
  for (size_t i = 0; i < static_cast<size_t>(block.rows); ++i) {
    for (size_t j = 0; j < cols; ++j) {
      const double v = block.values[i * cols + j];
      squares[feature_of(block, transposed, i, j)] += v * v;
    }
  }
}

std::vector<float> dora_scales(std::span<const float> magnitude, std::span<const double> squares) {
  std::vector<float> scales(magnitude.size());
  for (size_t o = 0; o < scales.size(); ++o) scales[o] = magnitude[o] / static_cast<float>(std::sqrt(squares[o]));
  return scales;
}

void apply_scales(F32Rows block, bool transposed, std::span<const float> scales) {
  const auto cols = static_cast<size_t>(block.cols);
  for (size_t i = 0; i < static_cast<size_t>(block.rows); ++i) {
    for (size_t j = 0; j < cols; ++j) block.values[i * cols + j] *= scales[feature_of(block, transposed, i, j)];
  }
}

void add_lora_bias(std::span<float> bias, std::span<const float> lora_bias, float scaling) {
  for (size_t i = 0; i < bias.size(); ++i) bias[i] += lora_bias[i] * scaling;
}

void round_and_cast(std::span<const float> values, DType w_dtype, DType out_dtype, std::span<std::byte> out) {
  std::vector<std::byte> scratch;
  round_and_cast(values, w_dtype, out_dtype, out, scratch);
}

void round_and_cast(std::span<const float> values, DType w_dtype, DType out_dtype, std::span<std::byte> out,
                    std::vector<std::byte>& scratch) {
  const auto count = static_cast<uint64_t>(values.size());
  const std::span<const std::byte> f32 = std::as_bytes(values);
  if (w_dtype == DType::kF32 || w_dtype == out_dtype) {
    // Rounding to W's dtype is the cast itself (or nothing).
    convert_floats(DType::kF32, f32, out_dtype, out, count);
    return;
  }
  const size_t size = values.size() * element_bytes(w_dtype);
  if (scratch.size() < size) scratch.resize(size);
  const std::span<std::byte> rounded = std::span(scratch).first(size);
  convert_floats(DType::kF32, f32, w_dtype, rounded, count);
  convert_floats(w_dtype, rounded, out_dtype, out, count);
}

}  // namespace reshard::pipelines_detail
