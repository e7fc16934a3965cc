#include "pipelines/tensor_map/strided_copy.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "layout/box_copy.h"
#include "layout/checked.h"
#include "layout/float_convert.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

using layout_detail::bf16_to_f32;
using layout_detail::BoxCopy;
using layout_detail::checked_mul;
using layout_detail::DimCursor;
using layout_detail::f16_to_f32;
using layout_detail::f32_to_bf16;
using layout_detail::f32_to_f16;
using layout_detail::merge_dims;
using layout_detail::StridedDim;

namespace {

template <typename T>
T load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T>
void store(std::byte* p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

// An element conversion: Src and Dst are the stored types, Fn maps one
// to the other (a template argument, so each copy loop calls it directly).
template <typename S, typename D, D (*Fn)(S)>
struct Convert {
  using Src = S;
  using Dst = D;
  static D convert(S value) { return Fn(value); }
};

template <typename T>
T unchanged(T value) {
  return value;
}
uint16_t bf16_to_f16(uint16_t v) { return f32_to_f16(bf16_to_f32(v)); }
uint16_t f16_to_bf16(uint16_t v) { return f32_to_bf16(f16_to_f32(v)); }

template <typename T>
using Same = Convert<T, T, unchanged<T>>;
using F32ToBF16 = Convert<float, uint16_t, f32_to_bf16>;
using F32ToF16 = Convert<float, uint16_t, f32_to_f16>;
using BF16ToF32 = Convert<uint16_t, float, bf16_to_f32>;
using F16ToF32 = Convert<uint16_t, float, f16_to_f32>;
using BF16ToF16 = Convert<uint16_t, uint16_t, bf16_to_f16>;
using F16ToBF16 = Convert<uint16_t, uint16_t, f16_to_bf16>;

constexpr int64_t kTile = 32;

// One axis, element by element (a cast, or a stride on either side).
template <typename C>
void copy_line(const std::byte* src, std::byte* dst, StridedDim axis) {
  using Src = typename C::Src;
  using Dst = typename C::Dst;
  for (int64_t i = 0; i < axis.size; ++i) {
    store<Dst>(dst + i * axis.dst_stride, C::convert(load<Src>(src + i * axis.src_stride)));
  }
}

// A transpose: `inner` is contiguous in dst, `across` in src. Tiles keep both
// sides' lines in cache.
template <typename C>
void copy_tiles(const std::byte* src, std::byte* dst, StridedDim across, StridedDim inner) {
  using Src = typename C::Src;
  using Dst = typename C::Dst;
  for (int64_t a0 = 0; a0 < across.size; a0 += kTile) {
    const int64_t a1 = std::min(across.size, a0 + kTile);
    for (int64_t b0 = 0; b0 < inner.size; b0 += kTile) {
      const int64_t b1 = std::min(inner.size, b0 + kTile);
      for (int64_t a = a0; a < a1; ++a) {
        const std::byte* from = src + a * static_cast<int64_t>(sizeof(Src));
        std::byte* to = dst + a * across.dst_stride;
        for (int64_t b = b0; b < b1; ++b) {
          store<Dst>(to + b * static_cast<int64_t>(sizeof(Dst)), C::convert(load<Src>(from + b * inner.src_stride)));
        }
      }
    }
  }
}

// Calls `body` at each position of `outer`, walked by the box copy's odometer.
template <typename Body>
void for_each_position(std::span<const StridedDim> outer, const std::byte* src, std::byte* dst, Body&& body) {
  int64_t positions = 1;
  for (const StridedDim& dim : outer) positions = checked_mul(positions, dim.size, "strided copy size");
  DimCursor at(outer, 0);
  for (int64_t i = 0; i < positions; ++i, at.next()) body(src + at.src(), dst + at.dst());
}

// The element loop, over dimensions already merged.
template <typename C>
void run(std::vector<StridedDim> dims, const std::byte* src, std::byte* dst) {
  if (dims.empty()) {
    store<typename C::Dst>(dst, C::convert(load<typename C::Src>(src)));
    return;
  }
  const StridedDim inner = dims.back();
  dims.pop_back();
  constexpr auto dst_width = static_cast<int64_t>(sizeof(typename C::Dst));
  constexpr auto src_width = static_cast<int64_t>(sizeof(typename C::Src));
  if (inner.dst_stride == dst_width && inner.src_stride != src_width) {
    const auto across =
        std::find_if(dims.begin(), dims.end(), [&](const StridedDim& d) { return d.src_stride == src_width; });
    if (across != dims.end()) {
      const StridedDim tile_axis = *across;
      dims.erase(across);
      for_each_position(dims, src, dst, [&](const std::byte* s, std::byte* d) {
        copy_tiles<C>(s, d, tile_axis, inner);
      });
      return;
    }
  }
  for_each_position(dims, src, dst, [&](const std::byte* s, std::byte* d) { copy_line<C>(s, d, inner); });
}

// The walk's axes with their strides in bytes, outermost first.
std::vector<StridedDim> byte_dims(const StridedCopy& copy, int64_t src_width, int64_t dst_width) {
  std::vector<StridedDim> dims(copy.shape.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    dims[i] = {copy.shape[i], copy.src_strides[i] * src_width, copy.dst_strides[i] * dst_width};
  }
  return dims;
}

template <typename C>
void dispatch(const StridedCopy& copy, const std::byte* src, std::byte* dst) {
  constexpr auto src_width = static_cast<int64_t>(sizeof(typename C::Src));
  constexpr auto dst_width = static_cast<int64_t>(sizeof(typename C::Dst));
  const std::vector<StridedDim> dims = byte_dims(copy, src_width, dst_width);
  src += copy.src_offset * src_width;
  dst += copy.dst_offset * dst_width;
  if constexpr (std::is_same_v<C, Same<typename C::Src>>) {
    // Equal dtypes are bytes: the box copy's rows, one memcpy each, unless a
    // row is one element of many (a transpose), which the element loop and its
    // tiles walk faster.
    const BoxCopy rows(dims, 0, 0, sizeof(typename C::Src));
    if (rows.row_bytes() > sizeof(typename C::Src) || rows.rows() == 1) {
      rows.copy(src, dst);
      return;
    }
  }
  run<C>(merge_dims(dims), src, dst);
}

}  // namespace

void run_strided_copy(const StridedCopy& copy, const std::byte* src, std::byte* dst) {
  if (copy.src_strides.size() != copy.shape.size() || copy.dst_strides.size() != copy.shape.size()) {
    throw Error(ErrorCode::kInvalidArgument, "strided copy: one stride per axis on each side");
  }
  if (std::any_of(copy.shape.begin(), copy.shape.end(), [](int64_t n) { return n < 0; })) {
    throw Error(ErrorCode::kInvalidArgument, "strided copy: an axis of negative size");
  }
  if (std::any_of(copy.shape.begin(), copy.shape.end(), [](int64_t n) { return n == 0; })) return;
  const DType from = copy.src_dtype, to = copy.dst_dtype;
  if (from == to) {
    switch (dtype_bits(from)) {
      case 8: return dispatch<Same<uint8_t>>(copy, src, dst);
      case 16: return dispatch<Same<uint16_t>>(copy, src, dst);
      case 32: return dispatch<Same<uint32_t>>(copy, src, dst);
      case 64: return dispatch<Same<uint64_t>>(copy, src, dst);
      default: break;
    }
  } else if (from == DType::kF32 && to == DType::kBF16) {
    return dispatch<F32ToBF16>(copy, src, dst);
  } else if (from == DType::kF32 && to == DType::kF16) {
    return dispatch<F32ToF16>(copy, src, dst);
  } else if (from == DType::kBF16 && to == DType::kF32) {
    return dispatch<BF16ToF32>(copy, src, dst);
  } else if (from == DType::kF16 && to == DType::kF32) {
    return dispatch<F16ToF32>(copy, src, dst);
  } else if (from == DType::kBF16 && to == DType::kF16) {
    return dispatch<BF16ToF16>(copy, src, dst);
  } else if (from == DType::kF16 && to == DType::kBF16) {
    return dispatch<F16ToBF16>(copy, src, dst);
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("strided copy: cannot copy {} to {}", dtype_name(from), dtype_name(to)));
}

}  // namespace reshard::pipelines_detail
