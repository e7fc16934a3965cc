// BoxCopy: copies a box of elements between two strided buffers, run by run.
// The one walk of strided runs: the executor's copies and messages, the file
// formats' runs and the pipelines' strided copies all take their runs from it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "layout/copy_bytes.h"
#include "reshard/layout/box.h"
#include "reshard/layout/byte_run.h"

namespace reshard::layout_detail {

// One dimension of a walk through two buffers: how many steps it takes and
// how many bytes each step moves in the src and in the dst buffer.
struct StridedDim {
  int64_t size = 0;
  int64_t src_stride = 0;
  int64_t dst_stride = 0;
};

// The same walk in the fewest dimensions: `dims` (outermost first) without
// its size-1 dimensions, each dimension merged into the one inside it when it
// steps exactly over it in both buffers.
std::vector<StridedDim> merge_dims(std::span<const StridedDim> dims);

// An odometer over `dims` (outermost first, which it must outlive): the byte
// offsets in both buffers of each position in turn, in row-major order,
// starting from position `position`.
class DimCursor {
 public:
  DimCursor(std::span<const StridedDim> dims, uint64_t position, int64_t src_base = 0, int64_t dst_base = 0);
  int64_t src() const { return src_; }
  int64_t dst() const { return dst_; }
  // Positions from here to the end of the innermost dimension (at least 1):
  // they step evenly, by that dimension's strides.
  uint64_t even_steps() const {
    return index_.empty() ? 1 : static_cast<uint64_t>(dims_.back().size - index_.back());
  }
  int64_t src_step() const { return index_.empty() ? 0 : dims_.back().src_stride; }
  int64_t dst_step() const { return index_.empty() ? 0 : dims_.back().dst_stride; }
  // Moves `steps` positions on, at most even_steps().
  void skip(uint64_t steps) {
    if (steps == 0 || index_.empty()) return;
    const auto within = static_cast<int64_t>(steps) - 1;  // the last one may wrap
    index_.back() += within;
    src_ += within * src_step();
    dst_ += within * dst_step();
    next();
  }
  // Inline: it is the step between the rows of every copy.
  void next() {
    for (size_t d = index_.size(); d-- > 0;) {
      const StridedDim& dim = dims_[d];
      src_ += dim.src_stride;
      dst_ += dim.dst_stride;
      if (++index_[d] < dim.size) return;
      index_[d] = 0;
      src_ -= dim.size * dim.src_stride;
      dst_ -= dim.size * dim.dst_stride;
    }
  }

 private:
  std::span<const StridedDim> dims_;
  std::vector<int64_t> index_;  // per dimension
  int64_t src_ = 0;
  int64_t dst_ = 0;
};

// The elements of the walk lie in rows of contiguous bytes in both buffers:
// the trailing dimensions that are contiguous in both are merged into one row,
// and outer dimensions that step evenly in both are merged too, so copying a
// box that is whole in both buffers is a single memcpy. Bytes of the walk are
// numbered in its own row-major order (its packed order); every operation can
// work on a sub-range of them, which is how copies are split over threads and
// transfers over messages.
class BoxCopy {
 public:
  // `src_extent` and `dst_extent` are the boxes (global coordinates) that two
  // row-major buffers hold; both must contain `box`, else Error(kInvalidArgument).
  BoxCopy(const Box& box, const Box& src_extent, const Box& dst_extent, size_t element_bytes);
  // Any strided walk: `dims` outermost first, strides in bytes; the element at
  // the walk's origin is `src_base` (`dst_base`) bytes into each buffer.
  // Error(kInvalidArgument) for a negative size.
  BoxCopy(std::span<const StridedDim> dims, int64_t src_base, int64_t dst_base, size_t element_bytes);

  // Bytes of the walk, of one contiguous row, and the number of rows.
  uint64_t bytes() const { return bytes_; }
  uint64_t row_bytes() const { return row_bytes_; }
  uint64_t rows() const { return bytes_ / row_bytes_; }

  // Walks the rows in order, from row `row`, giving each row's byte offset in both buffers.
  class RowCursor : public DimCursor {
   public:
    RowCursor(const BoxCopy& copy, uint64_t row) : DimCursor(copy.outer_, row, copy.src_base_, copy.dst_base_) {}
  };

  // Calls visit(src_offset, dst_offset, packed, length) for each run that
  // packed bytes [begin, end) cover (a row, or part of one at either end), in
  // packed order: offsets are bytes into each buffer, `packed` where the run
  // starts in the packed order. Error(kInvalidArgument) for a range past the end.
  template <typename Visit>
  void for_each_run(uint64_t begin, uint64_t end, Visit&& visit) const;
  template <typename Visit>
  void for_each_run(Visit&& visit) const {
    for_each_run(0, bytes_, visit);
  }

  // The same runs as stretches of rows that step evenly in both buffers:
  // calls visit(src_offset, dst_offset, length, count, src_step, dst_step)
  // for `count` runs of `length` bytes, the i-th at offset + i * step, in
  // packed order (a part row at either end is a stretch of one). A box's
  // rows come in a few such stretches, however many rows it has.
  template <typename Visit>
  void for_each_stretch(uint64_t begin, uint64_t end, Visit&& visit) const;

  // How the rows step through the src (or dst) buffer: copies with equal keys
  // from one buffer have rows that interleave there, so walking them row by
  // row together reads (writes) that buffer in order.
  enum class Side { kSrc, kDst };
  std::vector<int64_t> walk_key(Side side) const;

  // Whether each row starts where the one before it ends in that buffer.
  bool rows_adjacent(Side side) const;

  // Copies packed bytes [begin, end) from the src buffer to the dst buffer
  // (each pointing where the bases count from: a box's extent's first element).
  void copy(const std::byte* src, std::byte* dst, uint64_t begin, uint64_t end,
            CopyMode mode = CopyMode::kCached) const;
  void copy(const std::byte* src, std::byte* dst) const { copy(src, dst, 0, bytes_); }

  // Packs [begin, end) from the src buffer into `out` (end - begin bytes).
  void pack(const std::byte* src, uint64_t begin, uint64_t end, std::byte* out) const;
  // Unpacks `in` (end - begin bytes) into [begin, end) of the dst buffer.
  void unpack(const std::byte* in, uint64_t begin, uint64_t end, std::byte* dst) const;

  // Appends the runs that packed bytes [begin, end) occupy in the src (dst)
  // buffer, in packed order, merging runs that touch: what a message
  // gathers from a source shard (scatters into a target shard).
  void src_runs(const std::byte* src, uint64_t begin, uint64_t end, std::vector<ConstByteRun>& out) const;
  void dst_runs(std::byte* dst, uint64_t begin, uint64_t end, std::vector<ByteRun>& out) const;
  // The same runs as rows, a few words per stretch of rows, not per run:
  // consecutive runs that touch merge into one, and runs of one size at even
  // steps into one RunRows.
  void src_rows(const std::byte* src, uint64_t begin, uint64_t end, std::vector<ConstRunRows>& out) const;
  void dst_rows(std::byte* dst, uint64_t begin, uint64_t end, std::vector<RunRows>& out) const;

  // The offset at which [begin, end) starts in the src (dst) buffer, when those
  // bytes are contiguous there, so they can be sent (received) in place.
  std::optional<uint64_t> contiguous_in_src(uint64_t begin, uint64_t end) const;
  std::optional<uint64_t> contiguous_in_dst(uint64_t begin, uint64_t end) const;

 private:
  void take_rows(std::span<const StridedDim> dims, int64_t width);
  void check_range(uint64_t begin, uint64_t end) const;
  bool in_one_row(uint64_t begin, uint64_t end) const;
  std::pair<int64_t, int64_t> offsets_of(uint64_t packed) const;

  std::vector<StridedDim> outer_;  // dimensions walked by an odometer, outermost first
  int64_t src_base_ = 0;           // bytes from the src buffer's start to the walk's first element
  int64_t dst_base_ = 0;
  uint64_t row_bytes_ = 0;
  uint64_t bytes_ = 0;
};

template <typename Visit>
void BoxCopy::for_each_run(uint64_t begin, uint64_t end, Visit&& visit) const {
  if (begin >= end) return;
  check_range(begin, end);
  RowCursor row(*this, begin / row_bytes_);
  uint64_t skip = begin % row_bytes_;
  for (uint64_t packed = begin; packed < end; row.next()) {
    const uint64_t length = std::min(row_bytes_ - skip, end - packed);
    visit(row.src() + static_cast<int64_t>(skip), row.dst() + static_cast<int64_t>(skip), packed, length);
    packed += length;
    skip = 0;
  }
}


template <typename Visit>
void BoxCopy::for_each_stretch(uint64_t begin, uint64_t end, Visit&& visit) const {
  if (begin >= end) return;
  check_range(begin, end);
  RowCursor row(*this, begin / row_bytes_);
  uint64_t packed = begin;
  if (const uint64_t skip = begin % row_bytes_; skip != 0) {
    const uint64_t length = std::min(row_bytes_ - skip, end - packed);
    visit(row.src() + static_cast<int64_t>(skip), row.dst() + static_cast<int64_t>(skip), length, uint64_t{1},
          int64_t{0}, int64_t{0});
    packed += length;
    row.next();
  }
  while (end - packed >= row_bytes_) {
    const uint64_t count = std::min(row.even_steps(), (end - packed) / row_bytes_);
    visit(row.src(), row.dst(), row_bytes_, count, row.src_step(), row.dst_step());
    packed += count * row_bytes_;
    row.skip(count);
  }
  if (packed < end) visit(row.src(), row.dst(), end - packed, uint64_t{1}, int64_t{0}, int64_t{0});
}

}  // namespace reshard::layout_detail
