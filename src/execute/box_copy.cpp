#include "box_copy.h"

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
  const RowCursor row(*this, packed / row_bytes_);
  const auto skip = static_cast<int64_t>(packed % row_bytes_);
  return {row.src() + skip, row.dst() + skip};
}

BoxCopy::RowCursor::RowCursor(const BoxCopy& copy, uint64_t row) : copy_(&copy), index_(copy.outer_.size()) {
  auto rest = static_cast<int64_t>(row);
  src_ = copy.src_base_;
  dst_ = copy.dst_base_;
  for (size_t d = index_.size(); d-- > 0;) {
    const Dim& dim = copy.outer_[d];
    index_[d] = rest % dim.size;
    rest /= dim.size;
    src_ += index_[d] * dim.src_stride;
    dst_ += index_[d] * dim.dst_stride;
  }
}

void BoxCopy::RowCursor::next() {
  for (size_t d = index_.size(); d-- > 0;) {
    const Dim& dim = copy_->outer_[d];
    src_ += dim.src_stride;
    dst_ += dim.dst_stride;
    if (++index_[d] < dim.size) return;
    index_[d] = 0;
    src_ -= dim.size * dim.src_stride;
    dst_ -= dim.size * dim.dst_stride;
  }
}

std::vector<int64_t> BoxCopy::walk_key(Side side) const {
  std::vector<int64_t> key{static_cast<int64_t>(rows())};
  for (const Dim& dim : outer_) {
    key.push_back(dim.size);
    key.push_back(side == Side::kSrc ? dim.src_stride : dim.dst_stride);
  }
  return key;
}

bool BoxCopy::rows_adjacent(Side side) const {
  if (outer_.empty()) return true;
  const Dim& inner = outer_.back();
  return static_cast<uint64_t>(side == Side::kSrc ? inner.src_stride : inner.dst_stride) == row_bytes_;
}

template <typename Visit>
void BoxCopy::for_each_piece(uint64_t begin, uint64_t end, Visit&& visit) const {
  if (begin >= end) return;
  if (end > bytes_) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("byte range [{}, {}) is past the box's {} bytes",
                                                         begin, end, bytes_));
  }
  RowCursor row(*this, begin / row_bytes_);
  uint64_t skip = begin % row_bytes_;
  for (uint64_t packed = begin; packed < end; row.next()) {
    const uint64_t length = std::min(row_bytes_ - skip, end - packed);
    visit(row.src() + static_cast<int64_t>(skip), row.dst() + static_cast<int64_t>(skip), packed, length);
    packed += length;
    skip = 0;
  }
}

void BoxCopy::copy(const std::byte* src, std::byte* dst, uint64_t begin, uint64_t end, CopyMode mode) const {
  for_each_piece(begin, end, [&](int64_t src_offset, int64_t dst_offset, uint64_t, uint64_t length) {
    copy_bytes(dst + dst_offset, src + src_offset, length, mode);
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

namespace {

template <typename Run, typename Pointer>
void append_run(std::vector<Run>& out, Pointer data, uint64_t length) {
  if (!out.empty() && out.back().data + out.back().size == data) {
    out.back().size += length;
  } else {
    out.push_back(Run{data, length});
  }
}

}  // namespace

void BoxCopy::src_runs(const std::byte* src, uint64_t begin, uint64_t end, std::vector<ConstByteRun>& out) const {
  for_each_piece(begin, end, [&](int64_t src_offset, int64_t, uint64_t, uint64_t length) {
    append_run(out, src + src_offset, length);
  });
}

void BoxCopy::dst_runs(std::byte* dst, uint64_t begin, uint64_t end, std::vector<ByteRun>& out) const {
  for_each_piece(begin, end, [&](int64_t, int64_t dst_offset, uint64_t, uint64_t length) {
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

}  // namespace reshard
