// The LoRA merge's kernel at every vector width this CPU runs, and the rows
// around it (tiles, casts, streaming stores), against the definition
// computed one value at a time.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "layout/float_convert.h"
#include "pipelines/lora/merge_f32_kernel.h"
#include "pipelines/lora/merge_typed_rows.h"
#include "support/seed.h"

namespace reshard::pipelines_detail {

using layout_detail::convert_floats;

namespace {

using Bytes = std::vector<std::byte>;

std::vector<float> random_floats(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 0.5f);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

int64_t draw(std::mt19937_64& rng, int64_t low, int64_t high) {
  return std::uniform_int_distribution<int64_t>(low, high)(rng);
}

// The definition: the products summed from +0 in k order, then times scaling plus W, in f32.
float merged_value(float w, const std::vector<float>& left, const std::vector<float>& right, int64_t r, int64_t cols,
                   int64_t i, int64_t j, float scaling) {
  float sum = 0.0f;
  for (int64_t k = 0; k < r; ++k) {
    const float product = left[static_cast<size_t>(i * r + k)] * right[static_cast<size_t>(k * cols + j)];
    sum += product;
  }
  const float delta = sum * scaling;
  return w + delta;
}

const char* name_of(VectorWidth width) {
  switch (width) {
    case VectorWidth::k128:
      return "128-bit";
    case VectorWidth::k256:
      return "AVX2";
    case VectorWidth::k512:
      return "AVX-512";
  }
  return "?";
}

float load_f32(const Bytes& bytes, size_t at) {
  float value;
  std::memcpy(&value, bytes.data() + at, 4);
  return value;
}

TEST(MergeKernel, PanelsHoldEachColumnOfEveryRowAndZerosPastTheLast) {
  const int64_t r = 3, cols = 21;
  std::vector<float> right(static_cast<size_t>(r * cols));
  for (size_t n = 0; n < right.size(); ++n) right[n] = static_cast<float>(n + 1);
  const std::vector<float> panels = pack_panels(right, r, cols);
  ASSERT_EQ(panels.size(), static_cast<size_t>(2 * r * kPanelCols));
  for (int64_t k = 0; k < r; ++k) {
    for (int64_t j = 0; j < 2 * kPanelCols; ++j) {
      const float expected = j < cols ? right[static_cast<size_t>(k * cols + j)] : 0.0f;
      EXPECT_EQ(panels[static_cast<size_t>((j / kPanelCols) * r * kPanelCols + k * kPanelCols + j % kPanelCols)],
                expected)
          << "k " << k << " j " << j;
    }
  }
}

// Random shapes around every edge: rows past the last group of four, columns
// past the last whole vector and panel, ranks from 1 to past 16, strides wider
// than the rows, W at an odd address, in place or not.
TEST(MergeKernel, EveryVectorWidthGivesTheBitsOfTheDefinition) {
  std::mt19937_64 rng = testing::seeded_rng();
  for (const VectorWidth width : vector_widths_here()) {
    for (int trial = 0; trial < 150; ++trial) {
      const int64_t rows = draw(rng, 1, 13), cols = draw(rng, 1, 70), r = draw(rng, 1, 19);
      const bool in_place = trial % 3 == 0;
      const int64_t w_stride = cols + draw(rng, 0, 5);
      const int64_t out_stride = in_place ? w_stride : cols + draw(rng, 0, 5);
      const size_t offset = static_cast<size_t>(draw(rng, 0, 3));  // W's rows need not be aligned
      const std::vector<float> left = random_floats(static_cast<size_t>(rows * r), rng);
      const std::vector<float> right = random_floats(static_cast<size_t>(r * cols), rng);
      const std::vector<float> w_values = random_floats(static_cast<size_t>(rows * w_stride), rng);
      const float scaling = std::uniform_real_distribution<float>(0.1f, 4.0f)(rng);
      Bytes w(offset + w_values.size() * 4);
      std::memcpy(w.data() + offset, w_values.data(), w_values.size() * 4);
      const Bytes sentinel(static_cast<size_t>(rows * out_stride) * 4 + offset, std::byte{0x5a});
      Bytes out = in_place ? w : sentinel;

      const std::vector<float> panels = pack_panels(right, r, cols);
      add_low_rank_product(width, {left.data(), panels.data(), r, scaling}, rows, cols, w.data() + offset, w_stride,
                           out.data() + offset, out_stride);

      const Bytes& untouched = in_place ? w : sentinel;
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < out_stride; ++j) {
          const size_t at = offset + static_cast<size_t>(i * out_stride + j) * 4;
          const float expected = j < cols ? merged_value(w_values[static_cast<size_t>(i * w_stride + j)], left, right,
                                                         r, cols, i, j, scaling)
                                          : load_f32(untouched, at);
          ASSERT_EQ(load_f32(out, at), expected)
              << name_of(width) << ", trial " << trial << ": [" << rows << ", " << cols
              << "] r=" << r << (in_place ? " in place" : "") << ", value (" << i << ", " << j << ")";
        }
      }
    }
  }
}

struct RowsCase {
  DType w_dtype;
  DType out_dtype;
  int64_t rows;
  int64_t cols;
};

// W as `dtype`'s bytes, and its values as f32 (exactly representable).
Bytes encode(const std::vector<float>& values, DType dtype) {
  Bytes bytes(values.size() * element_bytes(dtype));
  convert_floats(DType::kF32, std::as_bytes(std::span(values)), dtype, bytes, values.size());
  return bytes;
}

std::vector<float> decode(const Bytes& bytes, DType dtype, size_t count) {
  std::vector<float> values(count);
  convert_floats(dtype, bytes, DType::kF32, std::as_writable_bytes(std::span(values)), count);
  return values;
}

class MergeRowsTest : public ::testing::TestWithParam<RowsCase> {};

// The rows go through tiles (cast, or streamed past kStreamMergedBytes) or
// straight through the kernel: each value is the definition's, rounded once to
// W's dtype, then written as the output's.
TEST_P(MergeRowsTest, EveryValueIsTheDefinitionRoundedToWsDtype) {
  const RowsCase c = GetParam();
  std::mt19937_64 rng = testing::seeded_rng();
  const int64_t r = draw(rng, 1, 17);
  const auto count = static_cast<size_t>(c.rows * c.cols);
  const std::vector<float> w_values = decode(encode(random_floats(count, rng), c.w_dtype), c.w_dtype, count);
  const Bytes w = encode(w_values, c.w_dtype);
  const std::vector<float> left = random_floats(static_cast<size_t>(c.rows * r), rng);
  const std::vector<float> right = random_floats(static_cast<size_t>(r * c.cols), rng);
  Bytes out(count * element_bytes(c.out_dtype));

  merge_rows(left, right, r, 0.75f, c.rows, c.cols, c.w_dtype, w, c.out_dtype, out);

  std::vector<float> merged(count);
  for (int64_t i = 0; i < c.rows; ++i) {
    for (int64_t j = 0; j < c.cols; ++j) {
      const auto at = static_cast<size_t>(i * c.cols + j);
      merged[at] = merged_value(w_values[at], left, right, r, c.cols, i, j, 0.75f);
    }
  }
  const std::vector<float> rounded = decode(encode(merged, c.w_dtype), c.w_dtype, count);
  const Bytes expected = encode(rounded, c.out_dtype);
  for (size_t n = 0; n < count; ++n) {
    const size_t width = element_bytes(c.out_dtype);
    ASSERT_EQ(std::memcmp(out.data() + n * width, expected.data() + n * width, width), 0)
        << "value " << n << " (row " << n / static_cast<size_t>(c.cols) << ") of [" << c.rows << ", " << c.cols
        << "] r=" << r;
  }
}

// 243 x 1100 f32 is past kStreamMergedBytes: streamed, with a partial tile of
// columns and of rows; 7 x 13 is small enough to go straight through.
INSTANTIATE_TEST_SUITE_P(Dtypes, MergeRowsTest,
                         ::testing::Values(RowsCase{DType::kF32, DType::kF32, 7, 13},
                                           RowsCase{DType::kF32, DType::kF32, 243, 1100},
                                           RowsCase{DType::kBF16, DType::kBF16, 37, 1100},
                                           RowsCase{DType::kF16, DType::kF32, 9, 1030},
                                           RowsCase{DType::kF32, DType::kBF16, 6, 2049},
                                           RowsCase{DType::kBF16, DType::kF16, 5, 40}));

}  // namespace
}  // namespace reshard::pipelines_detail
