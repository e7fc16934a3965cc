#include "pipelines/lora/merge_lora_produce.h"

#include <algorithm>
#include <vector>

#include "layout/float_convert.h"
#include "pipelines/common/block_pipeline.h"
#include "pipelines/lora/merge_box.h"
#include "pipelines/lora/dora_and_rounding.h"
#include "reshard/formats/safetensors_layout.h"

namespace reshard::pipelines_detail {

using layout_detail::convert_floats;

namespace {

using Entry = TensorCatalog::Entry;
using safetensors::TensorInfo;

Shape shape_of(const TensorInfo& info) { return safetensors::layout_shape(info.shape, info.name); }

std::vector<std::byte> read_whole(const TensorCatalog& catalog, const Entry& entry) {
  std::vector<std::byte> bytes(static_cast<size_t>(entry.info->byte_size()));
  catalog.file_of(entry).read(*entry.info, bytes);
  return bytes;
}

// A whole float tensor as f32.
std::vector<float> read_f32(const TensorCatalog& catalog, const Entry& entry) {
  const std::vector<std::byte> raw = read_whole(catalog, entry);
  std::vector<float> values(static_cast<size_t>(entry.info->elements()));
  convert_floats(entry.info->dtype, raw, DType::kF32, std::as_writable_bytes(std::span(values)), values.size());
  return values;
}

// W as blocks of whole rows, read ahead, merged over threads and written
// behind (run_block_pipeline). Each block's merge is W + ΔW for its rows,
// in W's dtype or, for DoRA's passes, unrounded in f32.
class MergedBlocks {
 public:
  MergedBlocks(const TensorCatalog& catalog, const Entry& w, const LoraDelta& delta, const MergeBlocking& blocking)
      : catalog_(catalog), w_(w), delta_(delta), threads_(std::max(1, blocking.threads)) {
    const Shape shape = shape_of(*w.info);
    rows_ = shape[0];
    cols_ = shape[1];
    row_bytes_ = static_cast<size_t>(cols_) * element_bytes(w.info->dtype);
    const size_t widest_row = std::max<size_t>({row_bytes_, static_cast<size_t>(cols_) * 4, 1});
    block_ = static_cast<int64_t>(std::max<size_t>(1, blocking.block_bytes / widest_row));
    min_rows_ = static_cast<int64_t>(std::max<size_t>(1, kMinMergeBytesPerThread / widest_row));
  }

  int64_t cols() const { return cols_; }
  size_t blocks() const { return rows_ == 0 ? 0 : static_cast<size_t>((rows_ - 1) / block_ + 1); }
  int64_t first_row(size_t block) const { return static_cast<int64_t>(block) * block_; }
  int64_t rows_of(size_t block) const { return std::min(block_, rows_ - first_row(block)); }
  Box box_of(size_t block) const { return Box({first_row(block), 0}, {rows_of(block), cols_}); }

  // Block `block`'s bytes of W, as the file holds them.
  void read(size_t block, BlockBuffer& raw) const {
    catalog_.file_of(w_).read(*w_.info, static_cast<uint64_t>(first_row(block)) * row_bytes_,
                              raw.resize(static_cast<size_t>(rows_of(block)) * row_bytes_));
  }

  // Block `block`'s W + ΔW from its bytes `raw`, rounded once to W's dtype and
  // written as `out_dtype` (F32 with W in F32: unrounded, for DoRA).
  void merge(size_t block, std::span<const std::byte> raw, DType out_dtype, std::span<std::byte> out) const {
    merge_lora_box_over_threads(delta_, box_of(block), w_.info->dtype, raw, out_dtype, out, threads_);
  }

  // Block `block`'s unrounded f32 W + ΔW (DoRA scales it before rounding).
  void merge_f32(size_t block, std::span<const std::byte> raw, std::vector<float>& merged) const {
    merged.resize(static_cast<size_t>(rows_of(block) * cols_));
    const std::span<std::byte> out = std::as_writable_bytes(std::span(merged));
    if (w_.info->dtype == DType::kF32) {
      merge(block, raw, DType::kF32, out);
      return;
    }
    // Merged from W in f32: merging from W's own dtype would round to it.
    std::vector<float> w(merged.size());
    convert_floats(w_.info->dtype, raw, DType::kF32, std::as_writable_bytes(std::span(w)), w.size());
    merge_lora_box_over_threads(delta_, box_of(block), DType::kF32, std::as_bytes(std::span(w)), DType::kF32, out,
                                threads_);
  }

  int threads() const { return threads_; }
  int64_t min_rows() const { return min_rows_; }

 private:
  const TensorCatalog& catalog_;
  const Entry& w_;
  const LoraDelta& delta_;
  int threads_ = 1;
  int64_t rows_ = 0, cols_ = 0, block_ = 1, min_rows_ = 1;
  size_t row_bytes_ = 0;
};

// DoRA's scale per output feature, from a first pass over the blocks (its sums
// in block order on one thread, so they do not depend on the thread count).
std::vector<float> dora_factors(const MergedBlocks& blocks, const std::vector<float>& magnitude, bool fan_in_fan_out,
                                BlockBuffers& buffers) {
  std::vector<double> squares(magnitude.size(), 0.0);
  std::vector<float> merged;
  BlockStages pass;
  pass.read = [&](size_t block, BlockBuffer& raw) { blocks.read(block, raw); };
  pass.transform = [&](size_t block, std::span<const std::byte> raw, BlockBuffer&) {
    blocks.merge_f32(block, raw, merged);
    add_squares({merged, blocks.first_row(block), blocks.rows_of(block), blocks.cols()}, fan_in_fan_out, squares);
  };
  run_block_pipeline(blocks.blocks(), pass, buffers);
  return dora_scales(magnitude, squares);
}

}  // namespace

void produce_merged_weight(const TensorCatalog& w_catalog, const Entry& w, const TensorCatalog& adapter,
                           const MergeModule& module, DType out_dtype, const MergeBlocking& blocking,
                           BlockBuffers& buffers, const ByteSink& sink) {
  const Entry& a_entry = adapter.tensors()[module.a];
  const Entry& b_entry = adapter.tensors()[module.b];
  const std::vector<std::byte> a = read_whole(adapter, a_entry), b = read_whole(adapter, b_entry);
  const LoraDelta delta{LoraFactor::in_memory(a_entry.info->dtype, shape_of(*a_entry.info), a),
                        LoraFactor::in_memory(b_entry.info->dtype, shape_of(*b_entry.info), b), module.scaling,
                        module.fan_in_fan_out};
  const MergedBlocks blocks(w_catalog, w, delta, blocking);
  std::vector<float> scales;
  if (module.magnitude) {
    scales = dora_factors(blocks, read_f32(adapter, adapter.tensors()[*module.magnitude]), module.fan_in_fan_out,
                          buffers);
  }
  const size_t out_width = element_bytes(out_dtype);
  std::vector<float> merged;  // DoRA's unrounded block: it outlives the stages that use it
  BlockStages stages;
  stages.read = [&](size_t block, BlockBuffer& raw) { blocks.read(block, raw); };
  stages.write = [&](size_t, std::span<const std::byte> out) { sink(out); };
  if (scales.empty()) {
    // Straight from W's bytes to the output's: the merge rounds and casts as it goes.
    stages.transform = [&](size_t block, std::span<const std::byte> raw, BlockBuffer& out) {
      const auto values = static_cast<size_t>(blocks.rows_of(block) * blocks.cols());
      blocks.merge(block, raw, out_dtype, out.resize(values * out_width));
    };
  } else {
    stages.transform = [&](size_t block, std::span<const std::byte> raw, BlockBuffer& out_buffer) {
      blocks.merge_f32(block, raw, merged);
      const std::span<std::byte> out = out_buffer.resize(merged.size() * out_width);
      const int64_t first = blocks.first_row(block), cols = blocks.cols();
      for_row_ranges(blocks.rows_of(block), blocks.threads(), blocks.min_rows(), [&](int64_t begin, int64_t end) {
        const auto from = static_cast<size_t>(begin * cols), to = static_cast<size_t>(end * cols);
        const std::span<float> rows = std::span(merged).subspan(from, to - from);
        apply_scales({rows, first + begin, end - begin, cols}, module.fan_in_fan_out, scales);
        round_and_cast(rows, w.info->dtype, out_dtype,
                       out.subspan(from * out_width, (to - from) * out_width));
      });
    };
  }
  run_block_pipeline(blocks.blocks(), stages, buffers);
}

void produce_merged_bias(const TensorCatalog& catalog, const Entry& bias, const TensorCatalog& adapter,
                         const MergeModule& module, DType out_dtype, const ByteSink& sink) {
  std::vector<float> values = read_f32(catalog, bias);
  const std::vector<float> lora = read_f32(adapter, adapter.tensors()[*module.bias]);
  add_lora_bias(values, lora, module.scaling);
  std::vector<std::byte> out(values.size() * element_bytes(out_dtype));
  round_and_cast(values, bias.info->dtype, out_dtype, out);
  sink(out);
}

}  // namespace reshard::pipelines_detail
