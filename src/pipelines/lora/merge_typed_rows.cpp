#include "pipelines/lora/merge_typed_rows.h"

#include <algorithm>
#include <vector>

#include "layout/copy_bytes.h"
#include "layout/float_convert.h"
#include "pipelines/lora/merge_f32_kernel.h"
#include "pipelines/lora/dora_and_rounding.h"

namespace reshard::pipelines_detail {

using layout_detail::convert_floats;
using layout_detail::copy_bytes;
using layout_detail::copy_rows;
using layout_detail::CopyMode;
using layout_detail::finish_streaming;

namespace {

// Rows and columns of the f32 tile that merged rows go through when they are
// cast, or streamed: 16 KiB, in L1 until it is written out. Its rows lie a
// line more than 4 KiB apart, so that they do not share L1 sets.
constexpr int64_t kTileRows = 4;
constexpr int64_t kTileCols = 1024;
constexpr int64_t kTileStride = kTileCols + kPanelCols;
static_assert(kTileCols % kPanelCols == 0, "a tile's columns start a panel");

// Writes `rows` merged f32 rows of `cols` values (the tile's, kTileStride
// apart) into `out` from row `row`, column `col` (row-major, `out_cols` per
// row) as `out_dtype`, rounded to `w_dtype` first. F32 rows reach the tile
// only when they are to be streamed (merge_rows merges smaller ones in place).
class TileWriter {
 public:
  TileWriter(DType w_dtype, DType out_dtype, std::span<std::byte> out, int64_t out_cols)
      : w_dtype_(w_dtype),
        out_dtype_(out_dtype),
        out_(out),
        out_cols_(out_cols),
        streaming_(w_dtype == DType::kF32 && out_dtype == DType::kF32) {}
  ~TileWriter() {
    if (streaming_) finish_streaming();
  }
  TileWriter(const TileWriter&) = delete;
  TileWriter& operator=(const TileWriter&) = delete;

  void write(const float* tile, int64_t rows, int64_t cols, int64_t row, int64_t col) {
    const size_t out_width = element_bytes(out_dtype_);
    std::byte* at = out_.data() + static_cast<size_t>(row * out_cols_ + col) * out_width;
    const auto row_bytes = static_cast<size_t>(out_cols_) * out_width;
    if (streaming_) {
      copy_rows(at, static_cast<int64_t>(row_bytes), reinterpret_cast<const std::byte*>(tile), kTileStride * 4,
                static_cast<size_t>(cols) * 4, static_cast<uint64_t>(rows), CopyMode::kStreaming);
      return;
    }
    for (int64_t i = 0; i < rows; ++i, at += row_bytes) {
      round_and_cast(std::span(tile + i * kTileStride, static_cast<size_t>(cols)), w_dtype_, out_dtype_,
                     std::span(at, static_cast<size_t>(cols) * out_width), rounded_);
    }
  }

 private:
  DType w_dtype_, out_dtype_;
  std::span<std::byte> out_;
  int64_t out_cols_;
  bool streaming_;
  std::vector<std::byte> rounded_;  // round_and_cast's scratch
};

}  // namespace

void merge_rows(std::span<const float> left, std::span<const float> right, int64_t r, float scaling, int64_t rows,
                int64_t cols, DType w_dtype, std::span<const std::byte> w, DType out_dtype, std::span<std::byte> out) {
  const std::vector<float> panels = pack_panels(right, r, cols);
  const LowRankProduct product{left.data(), panels.data(), r, scaling};
  if (w_dtype == DType::kF32 && out_dtype == DType::kF32 && out.size() < kStreamMergedBytes) {
    add_low_rank_product(product, rows, cols, w.data(), cols, out.data(), cols);
    return;
  }
  std::vector<float> tile(static_cast<size_t>(kTileRows * kTileStride));
  std::byte* const tile_bytes = reinterpret_cast<std::byte*>(tile.data());
  const size_t w_width = element_bytes(w_dtype);
  TileWriter writer(w_dtype, out_dtype, out, cols);
  for (int64_t row = 0; row < rows; row += kTileRows) {
    const int64_t tile_rows = std::min(kTileRows, rows - row);
    for (int64_t col = 0; col < cols; col += kTileCols) {
      const int64_t tile_cols = std::min(kTileCols, cols - col);
      const std::byte* w_at = w.data() + static_cast<size_t>(row * cols + col) * w_width;
      int64_t w_stride = cols;
      if (w_dtype != DType::kF32) {
        // W's values widened into the tile, merged there in place.
        for (int64_t i = 0; i < tile_rows; ++i) {
          convert_floats(
              w_dtype,
              std::span(w_at + static_cast<size_t>(i * cols) * w_width, static_cast<size_t>(tile_cols) * w_width),
              DType::kF32,
              std::span(tile_bytes + static_cast<size_t>(i * kTileStride) * 4, static_cast<size_t>(tile_cols) * 4),
              static_cast<uint64_t>(tile_cols));
        }
        w_at = tile_bytes;
        w_stride = kTileStride;
      }
      const LowRankProduct part{product.left + row * r, product.panels + (col / kPanelCols) * r * kPanelCols, r,
                                scaling};
      add_low_rank_product(part, tile_rows, tile_cols, w_at, w_stride, tile_bytes, kTileStride);
      writer.write(tile.data(), tile_rows, tile_cols, row, col);
    }
  }
}

}  // namespace reshard::pipelines_detail
