#include "layout/box_copy.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard::layout_detail {
namespace {

void check_contains(const Box& extent, const Box& box, const char* which) {
  if (extent.rank() != box.rank() || !extent.contains(box)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("box {} is not inside the {} buffer's extent {}", box.to_string(), which,
                            extent.to_string()));
  }
}

// Byte strides of a row-major buffer holding `extent`, and the byte offset of
// `box`'s first element in it.
std::pair<std::vector<int64_t>, int64_t> byte_layout(const Box& extent, const Box& box, int64_t element_bytes) {
  std::vector<int64_t> strides = row_major_strides(extent.shape());
  int64_t base = 0;
  for (size_t d = 0; d < strides.size(); ++d) {
    strides[d] = checked_mul(strides[d], element_bytes, "byte stride");
    base = checked_add(base, checked_mul(box.origin()[d] - extent.origin()[d], strides[d], "byte offset"),
                       "byte offset");
  }
  return {std::move(strides), base};
}

}  // namespace

std::vector<StridedDim> merge_dims(std::span<const StridedDim> dims) {
  // Walk inward-out, merging each dimension into the one inside it when it
  // steps exactly over it in both buffers. Size-1 dimensions vanish.
  std::vector<StridedDim> merged;  // innermost first
  for (size_t d = dims.size(); d-- > 0;) {
    const StridedDim& dim = dims[d];
    if (dim.size == 1) continue;
    if (!merged.empty()) {
      StridedDim& inner = merged.back();
      if (dim.src_stride == inner.size * inner.src_stride && dim.dst_stride == inner.size * inner.dst_stride) {
        inner.size *= dim.size;
        continue;
      }
    }
    merged.push_back(dim);
  }
  std::reverse(merged.begin(), merged.end());
  return merged;
}

DimCursor::DimCursor(std::span<const StridedDim> dims, uint64_t position, int64_t src_base, int64_t dst_base)
    : dims_(dims), index_(dims.size()), src_(src_base), dst_(dst_base) {
  auto rest = static_cast<int64_t>(position);
  for (size_t d = index_.size(); d-- > 0;) {
    const StridedDim& dim = dims_[d];
    index_[d] = rest % dim.size;
    rest /= dim.size;
    src_ += index_[d] * dim.src_stride;
    dst_ += index_[d] * dim.dst_stride;
  }
}

BoxCopy::BoxCopy(const Box& box, const Box& src_extent, const Box& dst_extent, size_t element_bytes) {
  check_contains(src_extent, box, "source");
  check_contains(dst_extent, box, "destination");
  const auto width = static_cast<int64_t>(element_bytes);
  bytes_ = checked_mul(static_cast<uint64_t>(box.volume()), element_bytes, "box size in bytes");
  row_bytes_ = element_bytes;
  if (bytes_ == 0) return;
  const auto [src_strides, src_base] = byte_layout(src_extent, box, width);
  const auto [dst_strides, dst_base] = byte_layout(dst_extent, box, width);
  src_base_ = src_base;
  dst_base_ = dst_base;
  std::vector<StridedDim> dims(box.rank());
  for (size_t d = 0; d < dims.size(); ++d) dims[d] = {box.shape()[d], src_strides[d], dst_strides[d]};
  take_rows(dims, width);
}

BoxCopy::BoxCopy(std::span<const StridedDim> dims, int64_t src_base, int64_t dst_base, size_t element_bytes)
    : src_base_(src_base), dst_base_(dst_base), row_bytes_(element_bytes) {
  uint64_t elements = 1;
  for (const StridedDim& dim : dims) {
    if (dim.size < 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("strided walk: a dimension of size {}", dim.size));
    }
    elements = checked_mul(elements, static_cast<uint64_t>(dim.size), "strided walk size");
  }
  bytes_ = checked_mul(elements, element_bytes, "strided walk size in bytes");
  if (bytes_ == 0) return;
  take_rows(dims, static_cast<int64_t>(element_bytes));
}

// The innermost merged dimension is the row when it is contiguous in both
// buffers; the others are walked by the odometer.
void BoxCopy::take_rows(std::span<const StridedDim> dims, int64_t width) {
  outer_ = merge_dims(dims);
  if (!outer_.empty() && outer_.back().src_stride == width && outer_.back().dst_stride == width) {
    row_bytes_ = static_cast<uint64_t>(outer_.back().size * width);
    outer_.pop_back();
  }
}

std::pair<int64_t, int64_t> BoxCopy::offsets_of(uint64_t packed) const {
  const RowCursor row(*this, packed / row_bytes_);
  const auto skip = static_cast<int64_t>(packed % row_bytes_);
  return {row.src() + skip, row.dst() + skip};
}

std::vector<int64_t> BoxCopy::walk_key(Side side) const {
  std::vector<int64_t> key{static_cast<int64_t>(rows())};
  for (const StridedDim& dim : outer_) {
    key.push_back(dim.size);
    key.push_back(side == Side::kSrc ? dim.src_stride : dim.dst_stride);
  }
  return key;
}

bool BoxCopy::rows_adjacent(Side side) const {
  if (outer_.empty()) return true;
  const StridedDim& inner = outer_.back();
  return static_cast<uint64_t>(side == Side::kSrc ? inner.src_stride : inner.dst_stride) == row_bytes_;
}

void BoxCopy::check_range(uint64_t begin, uint64_t end) const {
  if (end > bytes_) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("byte range [{}, {}) is past the box's {} bytes",
                                                         begin, end, bytes_));
  }
}

void BoxCopy::copy(const std::byte* src, std::byte* dst, uint64_t begin, uint64_t end, CopyMode mode) const {
  if (mode == CopyMode::kStreaming) {
    for_each_run(begin, end, [&](int64_t src_offset, int64_t dst_offset, uint64_t, uint64_t length) {
      copy_bytes(dst + dst_offset, src + src_offset, length, mode);
    });
    return;
  }
  // memcpy itself, not through copy_bytes: a call less per row, which short rows feel.
  for_each_run(begin, end, [&](int64_t src_offset, int64_t dst_offset, uint64_t, uint64_t length) {
    std::memcpy(dst + dst_offset, src + src_offset, length);
  });
}

void BoxCopy::pack(const std::byte* src, uint64_t begin, uint64_t end, std::byte* out) const {
  for_each_run(begin, end, [&](int64_t src_offset, int64_t, uint64_t packed, uint64_t length) {
    std::memcpy(out + (packed - begin), src + src_offset, length);
  });
}

void BoxCopy::unpack(const std::byte* in, uint64_t begin, uint64_t end, std::byte* dst) const {
  for_each_run(begin, end, [&](int64_t, int64_t dst_offset, uint64_t packed, uint64_t length) {
    std::memcpy(dst + dst_offset, in + (packed - begin), length);
  });
}

namespace {

template <typename Run, typename Pointer>
void append_run(std::vector<Run>& out, Pointer data, uint64_t length) {
  if (!out.empty() && out.back().data + out.back().size == data) {
    out.back().size += length;
  } else {
    out.push_back(Run{data, length});
  }
}

uintptr_t address_of(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Appends `count` runs of `size` bytes `stride` apart, extending the last
// entry where they continue it: in memory (one longer run) or along its steps.
template <typename Rows, typename Pointer>
void append_rows(std::vector<Rows>& out, Pointer data, uint64_t size, int64_t stride, uint64_t count) {
  if (size == 0 || count == 0) return;
  if (count == 1) stride = 0;
  if (count > 1 && stride == static_cast<int64_t>(size)) {  // rows end to end: one run
    size *= count;
    count = 1;
    stride = 0;
  }
  if (!out.empty()) {
    Rows& last = out.back();
    const auto step = static_cast<int64_t>(address_of(data) - address_of(last.data));
    if (last.count == 1 && count == 1 && step == static_cast<int64_t>(last.size)) {
      last.size += size;
      return;
    }
    if (last.size == size) {
      if (last.count == 1 && (count == 1 || stride == step)) {
        last.stride = step;
        last.count += count;
        return;
      }
      const bool continues = step == static_cast<int64_t>(last.count) * last.stride;
      if (continues && (count == 1 || stride == last.stride)) {
        last.count += count;
        return;
      }
    }
  }
  out.push_back(Rows{data, size, stride, count});
}

}  // namespace

void BoxCopy::src_rows(const std::byte* src, uint64_t begin, uint64_t end, std::vector<ConstRunRows>& out) const {
  for_each_stretch(begin, end, [&](int64_t src_offset, int64_t, uint64_t length, uint64_t count, int64_t src_step,
                                   int64_t) { append_rows(out, src + src_offset, length, src_step, count); });
}

void BoxCopy::dst_rows(std::byte* dst, uint64_t begin, uint64_t end, std::vector<RunRows>& out) const {
  for_each_stretch(begin, end, [&](int64_t, int64_t dst_offset, uint64_t length, uint64_t count, int64_t,
                                   int64_t dst_step) { append_rows(out, dst + dst_offset, length, dst_step, count); });
}

void BoxCopy::src_runs(const std::byte* src, uint64_t begin, uint64_t end, std::vector<ConstByteRun>& out) const {
  for_each_run(begin, end, [&](int64_t src_offset, int64_t, uint64_t, uint64_t length) {
    append_run(out, src + src_offset, length);
  });
}

void BoxCopy::dst_runs(std::byte* dst, uint64_t begin, uint64_t end, std::vector<ByteRun>& out) const {
  for_each_run(begin, end, [&](int64_t, int64_t dst_offset, uint64_t, uint64_t length) {
    append_run(out, dst + dst_offset, length);
  });
}

bool BoxCopy::in_one_row(uint64_t begin, uint64_t end) const {
  return begin < end && end <= bytes_ && begin / row_bytes_ == (end - 1) / row_bytes_;
}

std::optional<uint64_t> BoxCopy::contiguous_in_src(uint64_t begin, uint64_t end) const {
  if (!in_one_row(begin, end)) return std::nullopt;
  return static_cast<uint64_t>(offsets_of(begin).first);
}

std::optional<uint64_t> BoxCopy::contiguous_in_dst(uint64_t begin, uint64_t end) const {
  if (!in_one_row(begin, end)) return std::nullopt;
  return static_cast<uint64_t>(offsets_of(begin).second);
}

}  // namespace reshard::layout_detail
