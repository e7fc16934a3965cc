// run_strided_copy on random walks (permuted, padded axes on both sides, every
// pair of dtypes it copies between), against one element at a time.
#include "pipelines/tensor_map/strided_copy.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "layout/float_convert.h"
#include "reshard/layout/error.h"
#include "support/seed.h"

namespace reshard {

using layout_detail::bf16_to_f32;
using layout_detail::f16_to_f32;
using layout_detail::f32_to_bf16;
using layout_detail::f32_to_f16;
using pipelines_detail::run_strided_copy;
using pipelines_detail::StridedCopy;

namespace {

using Bytes = std::vector<std::byte>;

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

size_t width(DType dtype) { return element_bytes(dtype); }

// One element converted as the copy must: the same bits, or a float cast
// rounding to nearest even.
void convert_one(DType from, DType to, const std::byte* src, std::byte* dst) {
  if (from == to) {
    std::memcpy(dst, src, width(from));
    return;
  }
  float value = 0;
  uint16_t half = 0;
  if (from == DType::kF32) {
    std::memcpy(&value, src, 4);
  } else {
    std::memcpy(&half, src, 2);
    value = from == DType::kBF16 ? bf16_to_f32(half) : f16_to_f32(half);
  }
  if (to == DType::kF32) {
    std::memcpy(dst, &value, 4);
    return;
  }
  half = to == DType::kBF16 ? f32_to_bf16(value) : f32_to_f16(value);
  std::memcpy(dst, &half, 2);
}

// Strides (in elements) of a row-major buffer of `padded`, its axes taken in
// the order `order` (order[k]: the buffer axis holding walk axis k).
std::vector<int64_t> permuted_strides(const Shape& padded, const std::vector<size_t>& order) {
  std::vector<int64_t> buffer_strides(padded.size());
  int64_t stride = 1;
  for (size_t a = padded.size(); a-- > 0;) {
    buffer_strides[a] = stride;
    stride *= padded[order[a]];
  }
  std::vector<int64_t> strides(padded.size());
  for (size_t a = 0; a < padded.size(); ++a) strides[order[a]] = buffer_strides[a];
  return strides;
}

// One random side of a walk: its axes permuted, each padded by up to two
// elements; returns the strides and the elements the buffer needs.
std::pair<std::vector<int64_t>, int64_t> random_side(std::mt19937_64& rng, const Shape& shape) {
  Shape padded = shape;
  for (int64_t& n : padded) n += uniform(rng, 0, 2) * uniform(rng, 0, 1);
  std::vector<size_t> order(shape.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (uniform(rng, 0, 2) != 0) std::shuffle(order.begin(), order.end(), rng);
  int64_t elements = 1;
  for (const int64_t n : padded) elements *= n;
  return {permuted_strides(padded, order), elements};
}

void copy_elementwise(const StridedCopy& copy, const std::byte* src, std::byte* dst) {
  const size_t rank = copy.shape.size();
  int64_t volume = 1;
  for (const int64_t n : copy.shape) volume *= n;
  std::vector<int64_t> index(rank, 0);
  for (int64_t n = 0; n < volume; ++n) {
    int64_t from = copy.src_offset, to = copy.dst_offset;
    for (size_t d = 0; d < rank; ++d) {
      from += index[d] * copy.src_strides[d];
      to += index[d] * copy.dst_strides[d];
    }
    convert_one(copy.src_dtype, copy.dst_dtype, src + static_cast<size_t>(from) * width(copy.src_dtype),
                dst + static_cast<size_t>(to) * width(copy.dst_dtype));
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < copy.shape[d]) break;
      index[d] = 0;
    }
  }
}

TEST(StridedCopy, MatchesElementByElementOnRandomWalks) {
  const std::vector<std::pair<DType, DType>> pairs = {
      {DType::kU8, DType::kU8},     {DType::kBF16, DType::kBF16}, {DType::kF32, DType::kF32},
      {DType::kI64, DType::kI64},   {DType::kF32, DType::kBF16},  {DType::kF32, DType::kF16},
      {DType::kBF16, DType::kF32},  {DType::kF16, DType::kF32},   {DType::kBF16, DType::kF16},
      {DType::kF16, DType::kBF16}};
  std::mt19937_64 rng = testing::seeded_rng();
  for (int trial = 0; trial < 400; ++trial) {
    const auto [from, to] = pairs[static_cast<size_t>(uniform(rng, 0, static_cast<int64_t>(pairs.size()) - 1))];
    Shape shape(static_cast<size_t>(uniform(rng, 0, 4)));
    // Now and then up to two axes longer than a tile, so transposes walk in tiles.
    int long_axes = 0;
    for (int64_t& n : shape) {
      const bool long_axis = long_axes < 2 && uniform(rng, 0, 4) == 0;
      long_axes += long_axis ? 1 : 0;
      n = long_axis ? uniform(rng, 30, 70) : uniform(rng, 1, 6);
    }
    const auto [src_strides, src_elements] = random_side(rng, shape);
    const auto [dst_strides, dst_elements] = random_side(rng, shape);
    const StridedCopy copy{shape, src_strides, dst_strides, uniform(rng, 0, 3), uniform(rng, 0, 3), from, to};
    Bytes src(static_cast<size_t>(copy.src_offset + src_elements) * width(from));
    for (std::byte& b : src) b = static_cast<std::byte>(rng());
    Bytes expected(static_cast<size_t>(copy.dst_offset + dst_elements) * width(to));
    for (std::byte& b : expected) b = static_cast<std::byte>(rng());
    Bytes actual = expected;
    copy_elementwise(copy, src.data(), expected.data());
    run_strided_copy(copy, src.data(), actual.data());
    ASSERT_EQ(actual, expected) << "trial " << trial << ": " << dtype_name(from) << " to " << dtype_name(to)
                                << ", rank " << shape.size();
  }
}

TEST(StridedCopy, RefusesMismatchedStridesAndNegativeSizes) {
  std::byte buffer[8] = {};
  EXPECT_THROW(run_strided_copy({{2}, {1, 1}, {1}, 0, 0, DType::kU8, DType::kU8}, buffer, buffer), Error);
  EXPECT_THROW(run_strided_copy({{-1}, {1}, {1}, 0, 0, DType::kU8, DType::kU8}, buffer, buffer), Error);
}

}  // namespace
}  // namespace reshard
