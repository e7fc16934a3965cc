#include "pipelines/lora/merge_f32_kernel.h"

#include <cstring>
#include <vector>

namespace reshard::pipelines_detail {
namespace {

// Rows that share each load of right's columns, their sums in registers:
// 4 rows x 16 columns at AVX-512 are 4 sums, 1 column vector and 4
// broadcasts from memory per k. One row per pass read all of right again for
// every row of W (256 MiB at r = 8: 0.33-0.47x of memcpy; 4 rows, packed
// panels and the tile's streaming stores: 0.64-0.78x).
constexpr int64_t kRowsAtOnce = 4;
static_assert(kPanelCols % 16 == 0, "a panel holds whole vectors of every width");

// `Width` f32 in one vector register. GCC's vector types rather than loops
// left to the vectorizer: with W's and the output's strides apart from the
// columns, GCC 12 kept the sums on the stack and ran at half the pace. One
// specialization per width: GCC 12 drops vector_size with a dependent size
// (the "vector" would be one float).
template <int64_t Width>
struct LanesOf;
template <>
struct LanesOf<4> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct LanesOf<8> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct LanesOf<16> {
  typedef float type __attribute__((vector_size(64)));
};
template <int64_t Width>
using Lanes = typename LanesOf<Width>::type;
static_assert(sizeof(Lanes<4>) == 16 && sizeof(Lanes<8>) == 32 && sizeof(Lanes<16>) == 64);

// Rows x Width values, `right` at their first column; their sums stay in
// registers across k.
template <int64_t Width, int64_t Rows>
[[gnu::always_inline]] inline void add_block(const float* __restrict left, const float* __restrict right, int64_t r,
                                             float scaling, const std::byte* w, int64_t w_stride, std::byte* out,
                                             int64_t out_stride) {
  Lanes<Width> sums[static_cast<size_t>(Rows)] = {};
  for (int64_t k = 0; k < r; ++k) {
    Lanes<Width> right_k;
    std::memcpy(&right_k, right + k * kPanelCols, sizeof(right_k));
    for (int64_t i = 0; i < Rows; ++i) sums[i] += left[i * r + k] * right_k;
  }
  for (int64_t i = 0; i < Rows; ++i) {
    Lanes<Width> values;
    std::memcpy(&values, w + i * w_stride * 4, sizeof(values));
    values += sums[i] * scaling;
    std::memcpy(out + i * out_stride * 4, &values, sizeof(values));
  }
}

// right[0, j] in the panels; right[k, j] is k * kPanelCols past it.
[[gnu::always_inline]] inline const float* panel_column(const LowRankProduct& p, int64_t j) {
  return p.panels + (j / kPanelCols) * p.r * kPanelCols + j % kPanelCols;
}

// One value of a row, for the columns past the last whole vector.
[[gnu::always_inline]] inline void add_one(const LowRankProduct& p, const float* left, int64_t j, const std::byte* w,
                                           std::byte* out) {
  float sum = 0.0f;
  const float* right = panel_column(p, j);
  for (int64_t k = 0; k < p.r; ++k) sum += left[k] * right[k * kPanelCols];
  float value;
  std::memcpy(&value, w + j * 4, 4);
  value += sum * p.scaling;
  std::memcpy(out + j * 4, &value, 4);
}

template <int64_t Width, int64_t Rows>
[[gnu::always_inline]] inline void add_rows(const LowRankProduct& p, const float* left, int64_t cols,
                                            const std::byte* w, int64_t w_stride, std::byte* out, int64_t out_stride) {
  int64_t j0 = 0;
  for (; j0 + Width <= cols; j0 += Width) {
    add_block<Width, Rows>(left, panel_column(p, j0), p.r, p.scaling, w + j0 * 4, w_stride, out + j0 * 4, out_stride);
  }
  for (int64_t i = 0; i < Rows; ++i) {
    for (int64_t j = j0; j < cols; ++j) add_one(p, left + i * p.r, j, w + i * w_stride * 4, out + i * out_stride * 4);
  }
}

template <int64_t Width>
[[gnu::always_inline]] inline void add_all_rows(const LowRankProduct& p, int64_t rows, int64_t cols, const std::byte* w,
                                                int64_t w_stride, std::byte* out, int64_t out_stride) {
  int64_t i = 0;
  for (; i + kRowsAtOnce <= rows; i += kRowsAtOnce) {
    add_rows<Width, kRowsAtOnce>(p, p.left + i * p.r, cols, w + i * w_stride * 4, w_stride, out + i * out_stride * 4,
                                 out_stride);
  }
  for (; i < rows; ++i) {
    add_rows<Width, 1>(p, p.left + i * p.r, cols, w + i * w_stride * 4, w_stride, out + i * out_stride * 4, out_stride);
  }
}

using AddAllRows = void (*)(const LowRankProduct&, int64_t, int64_t, const std::byte*, int64_t, std::byte*, int64_t);

// 128-bit vectors: SSE2 on x86-64, NEON on Arm.
void add_all_rows_128(const LowRankProduct& p, int64_t rows, int64_t cols, const std::byte* w, int64_t w_stride,
                      std::byte* out, int64_t out_stride) {
  add_all_rows<4>(p, rows, cols, w, w_stride, out, out_stride);
}

#if defined(__x86_64__)
// The build turns off floating-point contraction, so neither fuses a multiply-add.
__attribute__((target("avx2"))) void add_all_rows_avx2(const LowRankProduct& p, int64_t rows, int64_t cols,
                                                       const std::byte* w, int64_t w_stride, std::byte* out,
                                                       int64_t out_stride) {
  add_all_rows<8>(p, rows, cols, w, w_stride, out, out_stride);
}

__attribute__((target("avx512f"))) void add_all_rows_avx512(const LowRankProduct& p, int64_t rows, int64_t cols,
                                                            const std::byte* w, int64_t w_stride, std::byte* out,
                                                            int64_t out_stride) {
  add_all_rows<16>(p, rows, cols, w, w_stride, out, out_stride);
}
#endif

AddAllRows kernel_of(VectorWidth width) {
  switch (width) {
#if defined(__x86_64__)
    case VectorWidth::k256:
      return add_all_rows_avx2;
    case VectorWidth::k512:
      return add_all_rows_avx512;
#endif
    default:
      return add_all_rows_128;
  }
}

}  // namespace

std::vector<float> pack_panels(std::span<const float> right, int64_t r, int64_t cols) {
  const int64_t panels = (cols + kPanelCols - 1) / kPanelCols;
  std::vector<float> packed(static_cast<size_t>(panels * r * kPanelCols), 0.0f);
  for (int64_t k = 0; k < r; ++k) {
    for (int64_t j = 0; j < cols; ++j) {
      packed[static_cast<size_t>((j / kPanelCols) * r * kPanelCols + k * kPanelCols + j % kPanelCols)] =
          right[static_cast<size_t>(k * cols + j)];
    }
  }
  return packed;
}

std::vector<VectorWidth> vector_widths_here() {
  std::vector<VectorWidth> widths{VectorWidth::k128};
#if defined(__x86_64__)
  __builtin_cpu_init();  // harmless when already initialised
  if (__builtin_cpu_supports("avx2")) widths.push_back(VectorWidth::k256);
  if (__builtin_cpu_supports("avx512f")) widths.push_back(VectorWidth::k512);
#endif
  return widths;
}

void add_low_rank_product(VectorWidth width, const LowRankProduct& product, int64_t rows, int64_t cols,
                          const std::byte* w, int64_t w_stride, std::byte* out, int64_t out_stride) {
  if (rows <= 0 || cols <= 0) return;
  kernel_of(width)(product, rows, cols, w, w_stride, out, out_stride);
}

void add_low_rank_product(const LowRankProduct& product, int64_t rows, int64_t cols, const std::byte* w,
                          int64_t w_stride, std::byte* out, int64_t out_stride) {
  static const VectorWidth widest = vector_widths_here().back();
  add_low_rank_product(widest, product, rows, cols, w, w_stride, out, out_stride);
}

}  // namespace reshard::pipelines_detail
