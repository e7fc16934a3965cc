#include "reshard/pipelines/lora_merge.h"

#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "reshard/layout/error.h"
#include "reshard/layout/float_convert.h"
#include "reshard/pipelines/strided_copy.h"

namespace reshard {
namespace {

// The box's elements as f32, dense row-major.
std::vector<float> read_f32(const LoraFactor& factor, const Box& box) {
  const auto count = static_cast<size_t>(box.volume());
  std::vector<float> values(count);
  if (factor.dtype == DType::kF32) {
    factor.read(box, std::as_writable_bytes(std::span(values)));
    return values;
  }
  std::vector<std::byte> raw(count * static_cast<size_t>(dtype_bits(factor.dtype) / 8));
  factor.read(box, raw);
  convert_floats(factor.dtype, raw, DType::kF32, std::as_writable_bytes(std::span(values)), count);
  return values;
}

// The [cols, rows] transpose of a dense [rows, cols] matrix.
std::vector<float> transposed(const std::vector<float>& m, int64_t rows, int64_t cols) {
  std::vector<float> t(m.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) t[static_cast<size_t>(j * rows + i)] = m[static_cast<size_t>(i * cols + j)];
  }
  return t;
}

float load_f32(DType dtype, const std::byte* p) {
  if (dtype == DType::kF32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return dtype == DType::kBF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

// `value` rounded to `w_dtype`, then stored as `out_dtype`.
void store_rounded(float value, DType w_dtype, DType out_dtype, std::byte* p) {
  if (w_dtype == DType::kBF16) value = bf16_to_f32(f32_to_bf16(value));
  if (w_dtype == DType::kF16) value = f16_to_f32(f32_to_f16(value));
  if (out_dtype == DType::kF32) {
    std::memcpy(p, &value, 4);
    return;
  }
  const uint16_t bits = out_dtype == DType::kBF16 ? f32_to_bf16(value) : f32_to_f16(value);
  std::memcpy(p, &bits, 2);
}

void require_float(DType dtype, std::string_view what, std::string_view module) {
  if (!is_castable_float(dtype)) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("module '{}': {} is {}; LoRA merges F32, F16 and BF16", module, what, dtype_name(dtype)));
  }
}

}  // namespace

LoraFactor LoraFactor::in_memory(DType dtype, Shape shape, std::span<const std::byte> bytes) {
  LoraFactor factor{dtype, shape, nullptr};
  factor.read = [dtype, shape, bytes](const Box& box, std::span<std::byte> out) {
    StridedCopy copy;
    copy.shape = box.shape();
    copy.src_strides = row_major_strides(shape);
    copy.dst_strides = row_major_strides(box.shape());
    for (size_t d = 0; d < shape.size(); ++d) copy.src_offset += box.origin()[d] * copy.src_strides[d];
    copy.src_dtype = copy.dst_dtype = dtype;
    run_strided_copy(copy, bytes.data(), out.data());
  };
  return factor;
}

void check_lora_shapes(const LoraDelta& delta, const Shape& w_shape, DType w_dtype, std::string_view module) {
  require_float(w_dtype, "the weight", module);
  require_float(delta.a.dtype, "lora_A", module);
  require_float(delta.b.dtype, "lora_B", module);
  const Shape& a = delta.a.shape;
  const Shape& b = delta.b.shape;
  const bool ranks = a.size() == 2 && b.size() == 2 && w_shape.size() == 2;
  const int64_t out = ranks ? w_shape[delta.fan_in_fan_out ? 1 : 0] : 0;
  const int64_t in = ranks ? w_shape[delta.fan_in_fan_out ? 0 : 1] : 0;
  if (!ranks || a[0] != b[1] || a[1] != in || b[0] != out) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("module '{}': lora_A [{}] and lora_B [{}] do not fit the weight [{}]{} (A must be "
                            "[r, in], B [out, r])",
                            module, fmt::join(a, ", "), fmt::join(b, ", "), fmt::join(w_shape, ", "),
                            delta.fan_in_fan_out ? " with fan_in_fan_out ([in, out])" : ""));
  }
}

void merge_lora_box(const LoraDelta& delta, const Box& w_box, DType w_dtype, std::span<const std::byte> w,
                    DType out_dtype, std::span<std::byte> out) {
  if (w_box.rank() != 2) throw Error(ErrorCode::kInvalidArgument, "LoRA merge: the weight box must be 2-D");
  const int64_t rows = w_box.shape()[0], cols = w_box.shape()[1];
  const auto count = static_cast<size_t>(rows * cols);
  const auto w_width = static_cast<size_t>(dtype_bits(w_dtype) / 8);
  const auto out_width = static_cast<size_t>(dtype_bits(out_dtype) / 8);
  if (w.size() != count * w_width || out.size() != count * out_width) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("LoRA merge: box {} needs {} and {} bytes, got {} and {}",
                                                         w_box.to_string(), count * w_width, count * out_width,
                                                         w.size(), out.size()));
  }
  if (count == 0) return;
  const int64_t r = delta.a.shape[0];
  const Interval row_range = w_box.interval(0), col_range = w_box.interval(1);
  // left[i, k] and right[k, j] so that delta[i, j] = sum_k left[i, k] * right[k, j]:
  // B's rows and A's columns, or with fan_in_fan_out A's columns (transposed) and B's rows (transposed).
  std::vector<float> left, right;
  if (!delta.fan_in_fan_out) {
    left = read_f32(delta.b, Box({row_range.begin, 0}, {rows, r}));
    right = read_f32(delta.a, Box({0, col_range.begin}, {r, cols}));
  } else {
    left = transposed(read_f32(delta.a, Box({0, row_range.begin}, {r, rows})), r, rows);
    right = transposed(read_f32(delta.b, Box({col_range.begin, 0}, {cols, r})), cols, r);
  }
  std::vector<float> acc(static_cast<size_t>(cols));
  const float scaling = delta.scaling;
  for (int64_t i = 0; i < rows; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t k = 0; k < r; ++k) {
      const float l = left[static_cast<size_t>(i * r + k)];
      const float* row = right.data() + k * cols;
      for (int64_t j = 0; j < cols; ++j) acc[static_cast<size_t>(j)] += l * row[j];
    }
    const size_t base = static_cast<size_t>(i * cols);
    for (int64_t j = 0; j < cols; ++j) {
      const size_t at = base + static_cast<size_t>(j);
      const float merged = load_f32(w_dtype, w.data() + at * w_width) + acc[static_cast<size_t>(j)] * scaling;
      store_rounded(merged, w_dtype, out_dtype, out.data() + at * out_width);
    }
  }
}

}  // namespace reshard
