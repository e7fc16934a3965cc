// BoxCopy: copies a box of elements between two row-major buffers, run by run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "copy_bytes.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/box.h"

namespace reshard {

// The elements of `box` lie in rows of contiguous bytes in both buffers: the
// trailing dimensions that are contiguous in both are merged into one row, and
// outer dimensions that step evenly in both are merged too, so copying a box
// that is whole in both buffers is a single memcpy. Bytes of the box are
// numbered in its own row-major order (its packed order); every operation can
// work on a sub-range of them, which is how copies are split over threads and
// transfers over messages.
class BoxCopy {
 public:
  // `src_extent` and `dst_extent` are the boxes (global coordinates) the two
  // buffers hold; both must contain `box`, else Error(kInvalidArgument).
  BoxCopy(const Box& box, const Box& src_extent, const Box& dst_extent, size_t element_bytes);

  // Bytes of the box, of one contiguous row, and the number of rows.
  uint64_t bytes() const { return bytes_; }
  uint64_t row_bytes() const { return row_bytes_; }
  uint64_t rows() const { return bytes_ / row_bytes_; }

  // Walks the rows in order, giving each row's byte offset in both buffers.
  class RowCursor {
   public:
    RowCursor(const BoxCopy& copy, uint64_t row);
    int64_t src() const { return src_; }
    int64_t dst() const { return dst_; }
    void next();

   private:
    const BoxCopy* copy_;
    std::vector<int64_t> index_;  // per outer dimension
    int64_t src_ = 0;
    int64_t dst_ = 0;
  };

  // How the rows step through the src (or dst) buffer: copies with equal keys
  // from one buffer have rows that interleave there, so walking them row by
  // row together reads (writes) that buffer in order.
  enum class Side { kSrc, kDst };
  std::vector<int64_t> walk_key(Side side) const;

  // Whether each row starts where the one before it ends in that buffer.
  bool rows_adjacent(Side side) const;

  // Copies packed bytes [begin, end) from the src buffer to the dst buffer
  // (each pointing at its extent's first element).
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

  // The offset at which [begin, end) starts in the src (dst) buffer, when those
  // bytes are contiguous there, so they can be sent (received) in place.
  std::optional<uint64_t> contiguous_in_src(uint64_t begin, uint64_t end) const;
  std::optional<uint64_t> contiguous_in_dst(uint64_t begin, uint64_t end) const;

 private:
  struct Dim {
    int64_t size = 0;
    int64_t src_stride = 0;  // bytes
    int64_t dst_stride = 0;  // bytes
  };
  friend class RowCursor;
  template <typename Visit>
  void for_each_piece(uint64_t begin, uint64_t end, Visit&& visit) const;
  bool in_one_row(uint64_t begin, uint64_t end) const;
  std::pair<int64_t, int64_t> offsets_of(uint64_t packed) const;

  std::vector<Dim> outer_;  // dimensions walked by an odometer, outermost first
  int64_t src_base_ = 0;    // bytes from the src buffer's start to the box's first element
  int64_t dst_base_ = 0;
  uint64_t row_bytes_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace reshard
