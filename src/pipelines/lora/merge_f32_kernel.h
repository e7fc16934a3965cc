// The LoRA merge's inner loop: W + (left @ right) * scaling over a block of
// rows, in f32, with the roundings the merge is defined by.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace reshard::pipelines_detail {

// Columns of right per panel.
constexpr int64_t kPanelCols = 16;

// right (dense [r, cols]) as panels of kPanelCols columns, each panel's r
// rows one after another, the last panel padded with zeros. Unpacked, the
// rows of right lie a row of W apart (4 KiB at 1024 f32 columns), so the r
// lines one step reads fall in one L1 set beside W's and the output's rows,
// and evict each other: the merge spent half its time on those loads.
std::vector<float> pack_panels(std::span<const float> right, int64_t r, int64_t cols);

// delta[i, j] = the sum over k = 0, 1, ..., r - 1 of left[i, k] * right[k, j]:
// left dense [rows, r]; `panels` right's panels from its first column on.
struct LowRankProduct {
  const float* left = nullptr;
  const float* panels = nullptr;
  int64_t r = 0;
  float scaling = 1;
};

// For i < rows and j < cols, the f32 at out + (i * out_stride + j) * 4 becomes
// the f32 at w + (i * w_stride + j) * 4 plus delta[i, j] * scaling. Each
// product and each partial sum is rounded to f32 (no fused multiply-add), the
// sum starting from +0 and taken in k order, so the result does not depend on
// the CPU or on how a caller splits the rows. `out` may be `w` (equal strides).
// Bytes, not floats: W's rows come from files and need not be aligned.
void add_low_rank_product(const LowRankProduct& product, int64_t rows, int64_t cols, const std::byte* w,
                          int64_t w_stride, std::byte* out, int64_t out_stride);

// The vector registers a kernel uses: SSE2 or NEON, AVX2, AVX-512.
enum class VectorWidth { k128, k256, k512 };

// The widths this CPU runs, narrowest first; add_low_rank_product uses the
// last. Every one gives the same bits (the tests run each).
std::vector<VectorWidth> vector_widths_here();

// add_low_rank_product at `width`, which must be one of vector_widths_here().
void add_low_rank_product(VectorWidth width, const LowRankProduct& product, int64_t rows, int64_t cols,
                          const std::byte* w, int64_t w_stride, std::byte* out, int64_t out_stride);

}  // namespace reshard::pipelines_detail
