#include "reshard/execute/box_copy.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "reshard/layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard {
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
  // Walk inward-out, merging each dimension into the one inside it when it
  // steps exactly over it in both buffers. Size-1 dimensions vanish.
  std::vector<Dim> merged;  // innermost first
  for (size_t d = box.rank(); d-- > 0;) {
    const Dim dim{box.shape()[d], src_strides[d], dst_strides[d]};
    if (dim.size == 1) continue;
    if (!merged.empty()) {
      Dim& inner = merged.back();
      if (dim.src_stride == inner.size * inner.src_stride && dim.dst_stride == inner.size * inner.dst_stride) {
        inner.size *= dim.size;
        continue;
      }
    }
    merged.push_back(dim);
  }
  if (!merged.empty() && merged.front().src_stride == width && merged.front().dst_stride == width) {
    row_bytes_ = static_cast<uint64_t>(merged.front().size * width);
    merged.erase(merged.begin());
  }
  outer_.assign(merged.rbegin(), merged.rend());
}

std::pair<int64_t, int64_t> BoxCopy::offsets_of(uint64_t packed) const {
  auto row = static_cast<int64_t>(packed / row_bytes_);
  const auto skip = static_cast<int64_t>(packed % row_bytes_);
  int64_t src = src_base_ + skip;
  int64_t dst = dst_base_ + skip;
  for (size_t d = outer_.size(); d-- > 0;) {
    const int64_t i = row % outer_[d].size;
    row /= outer_[d].size;
    src += i * outer_[d].src_stride;
    dst += i * outer_[d].dst_stride;
  }
  return {src, dst};
}

template <typename Visit>
void BoxCopy::for_each_piece(uint64_t begin, uint64_t end, Visit&& visit) const {
  if (begin >= end) return;
  if (end > bytes_) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("byte range [{}, {}) is past the box's {} bytes",
                                                         begin, end, bytes_));
  }
  // The odometer over outer dimensions starts at the row holding `begin`.
  const size_t rank = outer_.size();
  std::vector<int64_t> index(rank);
  auto row = static_cast<int64_t>(begin / row_bytes_);
  for (size_t d = rank; d-- > 0;) {
    index[d] = row % outer_[d].size;
    row /= outer_[d].size;
  }
  auto [src, dst] = offsets_of(begin);
  uint64_t skip = begin % row_bytes_;
  src -= static_cast<int64_t>(skip);
  dst -= static_cast<int64_t>(skip);
  for (uint64_t packed = begin; packed < end;) {
    const uint64_t length = std::min(row_bytes_ - skip, end - packed);
    visit(src + static_cast<int64_t>(skip), dst + static_cast<int64_t>(skip), packed, length);
    packed += length;
    skip = 0;
    for (size_t d = rank; d-- > 0;) {
      const Dim& dim = outer_[d];
      src += dim.src_stride;
      dst += dim.dst_stride;
      if (++index[d] < dim.size) break;
      index[d] = 0;
      src -= dim.size * dim.src_stride;
      dst -= dim.size * dim.dst_stride;
    }
  }
}

void BoxCopy::copy(const std::byte* src, std::byte* dst, uint64_t begin, uint64_t end) const {
  for_each_piece(begin, end, [&](int64_t src_offset, int64_t dst_offset, uint64_t, uint64_t length) {
    std::memcpy(dst + dst_offset, src + src_offset, length);
  });
}

void BoxCopy::pack(const std::byte* src, uint64_t begin, uint64_t end, std::byte* out) const {
  for_each_piece(begin, end, [&](int64_t src_offset, int64_t, uint64_t packed, uint64_t length) {
    std::memcpy(out + (packed - begin), src + src_offset, length);
  });
}

void BoxCopy::unpack(const std::byte* in, uint64_t begin, uint64_t end, std::byte* dst) const {
  for_each_piece(begin, end, [&](int64_t, int64_t dst_offset, uint64_t packed, uint64_t length) {
    std::memcpy(dst + dst_offset, in + (packed - begin), length);
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

}  // namespace reshard
