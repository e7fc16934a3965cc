#include "merge_lora_produce.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/float_convert.h"
#include "reshard/pipelines/lora_merge.h"

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

// f32 values rounded to `w_dtype` (W's precision), then written as `out_dtype`.
void round_and_cast(const std::vector<float>& values, DType w_dtype, DType out_dtype, std::vector<std::byte>& out) {
  const auto count = static_cast<uint64_t>(values.size());
  const std::span<const std::byte> f32 = std::as_bytes(std::span(values));
  out.resize(values.size() * width_of(out_dtype));
  if (w_dtype == DType::kF32 || w_dtype == out_dtype) {
    convert_floats(DType::kF32, f32, out_dtype, out, count);
    return;
  }
  std::vector<std::byte> rounded(values.size() * width_of(w_dtype));
  convert_floats(DType::kF32, f32, w_dtype, rounded, count);
  convert_floats(w_dtype, rounded, out_dtype, out, count);
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
    std::vector<float> w, merged;
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

// DoRA's magnitude[o] / ||W + ΔW||_o per output feature o, as PEFT's merge
// computes it (the norm from the unrounded f32 sums, as f32; an f32 division).
std::vector<float> dora_factors(const MergedBlocks& blocks, const std::vector<float>& magnitude, bool fan_in_fan_out) {
  std::vector<double> squares(magnitude.size(), 0.0);
  const auto cols = static_cast<size_t>(blocks.cols());
  blocks.for_each([&](int64_t row, int64_t count, const std::vector<float>& merged) {
    for (size_t i = 0; i < static_cast<size_t>(count); ++i) {
      for (size_t j = 0; j < cols; ++j) {
        const double v = merged[i * cols + j];
        squares[fan_in_fan_out ? j : static_cast<size_t>(row) + i] += v * v;
      }
    }
  });
  std::vector<float> factors(magnitude.size());
  for (size_t o = 0; o < factors.size(); ++o) factors[o] = magnitude[o] / static_cast<float>(std::sqrt(squares[o]));
  return factors;
}

}  // namespace

void produce_merged_weight(const TensorCatalog& w_catalog, const Entry& w, const TensorCatalog& adapter,
                           const MergeModule& module, DType out_dtype, size_t chunk_bytes, const ByteSink& sink) {
  const std::vector<std::byte> a = read_whole(adapter, *module.a), b = read_whole(adapter, *module.b);
  const LoraDelta delta{LoraFactor::in_memory(module.a->info->dtype, shape_of(*module.a->info), a),
                        LoraFactor::in_memory(module.b->info->dtype, shape_of(*module.b->info), b), module.scaling,
                        module.fan_in_fan_out};
  const MergedBlocks blocks(w_catalog, w, delta, chunk_bytes);
  std::vector<float> factors;
  if (module.magnitude != nullptr) factors = dora_factors(blocks, read_f32(adapter, *module.magnitude), module.fan_in_fan_out);
  const auto cols = static_cast<size_t>(blocks.cols());
  std::vector<float> scaled;
  std::vector<std::byte> out;
  blocks.for_each([&](int64_t row, int64_t count, const std::vector<float>& merged) {
    if (factors.empty()) {
      round_and_cast(merged, w.info->dtype, out_dtype, out);
    } else {
      scaled.resize(merged.size());
      for (size_t i = 0; i < static_cast<size_t>(count); ++i) {
        for (size_t j = 0; j < cols; ++j) {
          scaled[i * cols + j] = factors[module.fan_in_fan_out ? j : static_cast<size_t>(row) + i] * merged[i * cols + j];
        }
      }
      round_and_cast(scaled, w.info->dtype, out_dtype, out);
    }
    sink(out);
  });
}

void produce_merged_bias(const TensorCatalog& catalog, const Entry& bias, const TensorCatalog& adapter,
                         const MergeModule& module, DType out_dtype, const ByteSink& sink) {
  std::vector<float> values = read_f32(catalog, bias);
  const std::vector<float> lora = read_f32(adapter, *module.bias);
  for (size_t i = 0; i < values.size(); ++i) values[i] += lora[i] * module.scaling;
  std::vector<std::byte> out;
  round_and_cast(values, bias.info->dtype, out_dtype, out);
  sink(out);
}

}  // namespace reshard::pipelines_detail
