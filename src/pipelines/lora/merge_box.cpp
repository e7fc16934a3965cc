#include "pipelines/lora/merge_box.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "layout/float_convert.h"
#include "pipelines/common/block_pipeline.h"
#include "pipelines/lora/dora_and_rounding.h"
#include "pipelines/lora/merge_typed_rows.h"
#include "pipelines/tensor_map/strided_copy.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

using layout_detail::convert_floats;

namespace {

// The box's elements as f32, dense row-major.
std::vector<float> read_f32(const LoraFactor& factor, const Box& box) {
  const auto count = static_cast<size_t>(box.volume());
  std::vector<float> values(count);
  if (factor.dtype == DType::kF32) {
    factor.read(box, std::as_writable_bytes(std::span(values)));
    return values;
  }
  std::vector<std::byte> raw(count * element_bytes(factor.dtype));
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

// The boxes of A and B the merge of `w_box` reads: B's rows and A's columns
// of the box, or with fan_in_fan_out A's columns of its rows and B's rows of
// its columns.
struct FactorBoxes {
  Box a;
  Box b;
};

FactorBoxes factor_boxes(const LoraDelta& delta, const Box& w_box) {
  const int64_t r = delta.a.shape[0], rows = w_box.shape()[0], cols = w_box.shape()[1];
  const int64_t row0 = w_box.origin()[0], col0 = w_box.origin()[1];
  if (delta.fan_in_fan_out) return {Box({0, row0}, {r, rows}), Box({col0, 0}, {cols, r})};
  return {Box({0, col0}, {r, cols}), Box({row0, 0}, {rows, r})};
}

// `factor` served from `bytes`, which hold its box `part` (dense row-major):
// boxes inside `part` only.
LoraFactor in_memory_part(const LoraFactor& factor, const Box& part, std::span<const std::byte> bytes) {
  const LoraFactor local = LoraFactor::in_memory(factor.dtype, part.shape(), bytes);
  LoraFactor served{factor.dtype, factor.shape, nullptr};
  served.read = [local, part](const Box& box, std::span<std::byte> out) {
    std::vector<int64_t> origin(box.rank());
    for (size_t d = 0; d < box.rank(); ++d) origin[d] = box.origin()[d] - part.origin()[d];
    local.read(Box(origin, box.shape()), out);  // refuses a box outside `part`
  };
  return served;
}

// Checks a merge of `w_box` from `w_size` bytes of W into `out_size` bytes
// (Error(kInvalidArgument) naming what does not fit); false when the box is
// empty, so there is nothing to merge.
bool check_merge(const LoraDelta& delta, const Box& w_box, DType w_dtype, size_t w_size, DType out_dtype,
                 size_t out_size) {
  if (w_box.rank() != 2) throw Error(ErrorCode::kInvalidArgument, "LoRA merge: the weight box must be 2-D");
  const auto count = static_cast<size_t>(w_box.shape()[0] * w_box.shape()[1]);
  const size_t w_width = element_bytes(w_dtype);
  const size_t out_width = element_bytes(out_dtype);
  if (w_size != count * w_width || out_size != count * out_width) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("LoRA merge: box {} needs {} and {} bytes, got {} and {}",
                                                         w_box.to_string(), count * w_width, count * out_width,
                                                         w_size, out_size));
  }
  if (delta.a.shape.size() != 2 || delta.b.shape.size() != 2 || delta.a.shape[0] != delta.b.shape[1]) {
    throw Error(ErrorCode::kInvalidArgument, "LoRA merge: A must be [r, in] and B [out, r]");
  }
  if (count == 0) return false;
  // W's extent, as the factors give it: [out, in], or [in, out] with fan_in_fan_out.
  const Shape w_shape = delta.fan_in_fan_out ? Shape{delta.a.shape[1], delta.b.shape[0]}
                                             : Shape{delta.b.shape[0], delta.a.shape[1]};
  if (!Box::whole(w_shape).contains(w_box) || w_box.origin()[0] < 0 || w_box.origin()[1] < 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("LoRA merge: box {} is outside the weight [{}]",
                                                         w_box.to_string(), fmt::join(w_shape, ", ")));
  }
  return true;
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
    const uint64_t expected = dtype_byte_size(dtype, static_cast<uint64_t>(box.volume()));
    if (!Box::whole(shape).contains(box) || box.rank() != shape.size() || out.size() != expected ||
        bytes.size() != dtype_byte_size(dtype, static_cast<uint64_t>(Box::whole(shape).volume()))) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("LoRA factor [{}]: cannot read box {} into {} bytes",
                                                           fmt::join(shape, ", "), box.to_string(), out.size()));
    }
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
  if (!check_merge(delta, w_box, w_dtype, w.size(), out_dtype, out.size())) return;
  const int64_t rows = w_box.shape()[0], cols = w_box.shape()[1];
  const int64_t r = delta.a.shape[0];
  // left[i, k] and right[k, j] so that delta[i, j] = sum_k left[i, k] * right[k, j]:
  // B's rows and A's columns, or with fan_in_fan_out A's columns (transposed) and B's rows (transposed).
  const FactorBoxes parts = factor_boxes(delta, w_box);
  std::vector<float> left, right;
  if (!delta.fan_in_fan_out) {
    left = read_f32(delta.b, parts.b);
    right = read_f32(delta.a, parts.a);
  } else {
    left = transposed(read_f32(delta.a, parts.a), r, rows);
    right = transposed(read_f32(delta.b, parts.b), cols, r);
  }
  pipelines_detail::merge_rows(left, right, r, delta.scaling, rows, cols, w_dtype, w, out_dtype, out);
}

void merge_lora_box_over_threads(const LoraDelta& delta, const Box& w_box, DType w_dtype, std::span<const std::byte> w,
                                 DType out_dtype, std::span<std::byte> out, int threads) {
  if (!check_merge(delta, w_box, w_dtype, w.size(), out_dtype, out.size())) return;
  const int64_t rows = w_box.shape()[0], cols = w_box.shape()[1];
  const auto w_row = static_cast<size_t>(dtype_byte_size(w_dtype, static_cast<uint64_t>(cols)));
  const auto out_row = static_cast<size_t>(dtype_byte_size(out_dtype, static_cast<uint64_t>(cols)));
  // The factors' parts the box uses, read once here: the threads read memory,
  // whatever serves the factors (an export's input serves one thread at a time).
  const FactorBoxes parts = factor_boxes(delta, w_box);
  std::vector<std::byte> a_bytes(dtype_byte_size(delta.a.dtype, static_cast<uint64_t>(parts.a.volume())));
  std::vector<std::byte> b_bytes(dtype_byte_size(delta.b.dtype, static_cast<uint64_t>(parts.b.volume())));
  delta.a.read(parts.a, a_bytes);
  delta.b.read(parts.b, b_bytes);
  const LoraDelta in_memory{in_memory_part(delta.a, parts.a, a_bytes), in_memory_part(delta.b, parts.b, b_bytes),
                            delta.scaling, delta.fan_in_fan_out};
  const auto min_rows = static_cast<int64_t>(kMinMergeBytesPerThread / std::max<size_t>({w_row, out_row, 1}));
  pipelines_detail::for_row_ranges(rows, threads, std::max<int64_t>(1, min_rows), [&](int64_t begin, int64_t end) {
    const auto b = static_cast<size_t>(begin), e = static_cast<size_t>(end);
    merge_lora_box(in_memory, Box({w_box.origin()[0] + begin, w_box.origin()[1]}, {end - begin, cols}), w_dtype,
                   w.subspan(b * w_row, (e - b) * w_row), out_dtype, out.subspan(b * out_row, (e - b) * out_row));
  });
}

}  // namespace reshard::pipelines_detail
