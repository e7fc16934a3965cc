#include "pipelines/lora/merge_lora_produce.h"

#include <algorithm>
#include <vector>

#include "layout/float_convert.h"
#include "pipelines/lora/lora_merge.h"
#include "pipelines/lora/merge_math.h"
#include "reshard/formats/safetensors_layout.h"

namespace reshard::pipelines_detail {
namespace {

using Entry = TensorCatalog::Entry;
using safetensors::TensorInfo;

Shape shape_of(const TensorInfo& info) { return safetensors::layout_shape(info.shape, info.name); }

size_t width_of(DType dtype) { return static_cast<size_t>(dtype_bits(dtype) / 8); }

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

// Reads W block by block and hands each block's unrounded f32 W + ΔW to `use`.
class MergedBlocks {
 public:
  MergedBlocks(const TensorCatalog& catalog, const Entry& w, const LoraDelta& delta, size_t chunk_bytes)
      : catalog_(catalog), w_(w), delta_(delta) {
    const Shape shape = shape_of(*w.info);
    rows_ = shape[0];
    cols_ = shape[1];
    row_bytes_ = static_cast<size_t>(cols_) * width_of(w.info->dtype);
    const size_t f32_row = static_cast<size_t>(cols_) * 4;
    block_ = static_cast<int64_t>(std::max<size_t>(1, chunk_bytes / std::max<size_t>({row_bytes_, f32_row, 1})));
  }

  int64_t cols() const { return cols_; }

  template <typename Use>
  void for_each(const Use& use) const {
    std::vector<std::byte> raw;
    std::vector<float> w, merged;  // merged: handed to `use`, which may scale it in place
    for (int64_t row = 0; row < rows_; row += block_) {
      const int64_t count = std::min(block_, rows_ - row);
      const auto n = static_cast<size_t>(count * cols_);
      raw.resize(static_cast<size_t>(count) * row_bytes_);
      catalog_.file_of(w_).read(*w_.info, static_cast<uint64_t>(row) * row_bytes_, raw);
      w.resize(n);
      merged.resize(n);
      convert_floats(w_.info->dtype, raw, DType::kF32, std::as_writable_bytes(std::span(w)), n);
      merge_lora_box(delta_, Box({row, 0}, {count, cols_}), DType::kF32, std::as_bytes(std::span(w)), DType::kF32,
                     std::as_writable_bytes(std::span(merged)));
      use(row, count, merged);
    }
  }

 private:
  const TensorCatalog& catalog_;
  const Entry& w_;
  const LoraDelta& delta_;
  int64_t rows_ = 0, cols_ = 0, block_ = 1;
  size_t row_bytes_ = 0;
};

// DoRA's scale per output feature, from a first pass over the blocks.
std::vector<float> dora_factors(const MergedBlocks& blocks, const std::vector<float>& magnitude, bool fan_in_fan_out) {
  std::vector<double> squares(magnitude.size(), 0.0);
  blocks.for_each([&](int64_t row, int64_t count, std::vector<float>& merged) {
    add_squares({merged, row, count, blocks.cols()}, fan_in_fan_out, squares);
  });
  return dora_scales(magnitude, squares);
}

}  // namespace

void produce_merged_weight(const TensorCatalog& w_catalog, const Entry& w, const TensorCatalog& adapter,
                           const MergeModule& module, DType out_dtype, size_t chunk_bytes, const ByteSink& sink) {
  const Entry& a_entry = adapter.tensors()[module.a];
  const Entry& b_entry = adapter.tensors()[module.b];
  const std::vector<std::byte> a = read_whole(adapter, a_entry), b = read_whole(adapter, b_entry);
  const LoraDelta delta{LoraFactor::in_memory(a_entry.info->dtype, shape_of(*a_entry.info), a),
                        LoraFactor::in_memory(b_entry.info->dtype, shape_of(*b_entry.info), b), module.scaling,
                        module.fan_in_fan_out};
  const MergedBlocks blocks(w_catalog, w, delta, chunk_bytes);
  std::vector<float> scales;
  if (module.magnitude) {
    scales = dora_factors(blocks, read_f32(adapter, adapter.tensors()[*module.magnitude]), module.fan_in_fan_out);
  }
  std::vector<std::byte> out;
  blocks.for_each([&](int64_t row, int64_t count, std::vector<float>& merged) {
    if (!scales.empty()) apply_scales({merged, row, count, blocks.cols()}, module.fan_in_fan_out, scales);
    out.resize(merged.size() * width_of(out_dtype));
    round_and_cast(merged, w.info->dtype, out_dtype, out);
    sink(out);
  });
}

void produce_merged_bias(const TensorCatalog& catalog, const Entry& bias, const TensorCatalog& adapter,
                         const MergeModule& module, DType out_dtype, const ByteSink& sink) {
  std::vector<float> values = read_f32(catalog, bias);
  const std::vector<float> lora = read_f32(adapter, adapter.tensors()[*module.bias]);
  add_lora_bias(values, lora, module.scaling);
  std::vector<std::byte> out(values.size() * width_of(out_dtype));
  round_and_cast(values, bias.info->dtype, out_dtype, out);
  sink(out);
}

}  // namespace reshard::pipelines_detail
