// Internal to the planner: the pieces a target chunk is cut into, found per dimension.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/sharding.h"

namespace reshard::plan_detail {

// Numbers chunk tuples densely (row-major over the chunk counts), so devices
// can be grouped by the slice they hold in a flat vector instead of a map.
class ChunkIndex {
 public:
  explicit ChunkIndex(const Tiling& tiling);
  int64_t size() const { return size_; }
  int64_t of(std::span<const int64_t> chunk) const;

 private:
  std::vector<int64_t> counts_;
  int64_t size_ = 1;
};

// The part of one target chunk that one source chunk tuple supplies.
struct Piece {
  int64_t src_chunk = 0;  // source chunk tuple, numbered by ChunkIndex
  Box box;                // global coordinates, never empty
  uint64_t bytes = 0;
};

// Cuts target chunks into pieces. Along each dimension the source chunks a
// target chunk meets are found once by interval search; a target chunk tuple's
// pieces are the cartesian product of its per-dimension overlaps, computed once
// and shared by every target replica of that tuple.
class PieceFinder {
 public:
  PieceFinder(const Tiling& src, const Tiling& dst, DType dtype);

  const ChunkIndex& src_index() const { return src_index_; }

  // The pieces of the target chunk tuple `dst_chunk`, in row-major box order,
  // for one target device that holds it; the caller may move the boxes out.
  // Cut once per tuple and cached only while other target replicas of the
  // tuple still need them; valid until the next call.
  std::vector<Piece>& take_pieces(std::span<const int64_t> dst_chunk);

  // How many pieces the target chunk tuple `dst_chunk` has, without cutting it.
  size_t count_pieces(std::span<const int64_t> dst_chunk) const;

 private:
  struct DimOverlap {
    int64_t src_chunk = 0;
    Interval interval;
  };
  void cut(std::span<const int64_t> dst_chunk, std::vector<Piece>& pieces);

  DType dtype_;
  ChunkIndex src_index_;
  ChunkIndex dst_index_;
  // [dim][target chunk along dim] -> the source chunks it meets, in order.
  std::vector<std::vector<std::vector<DimOverlap>>> overlaps_;
  std::vector<std::optional<std::vector<Piece>>> pieces_;  // by target chunk tuple
  std::vector<int64_t> takers_left_;                       // target devices yet to take them
  // Reused buffers: a plan cuts thousands of chunks, and allocations dominate.
  std::vector<Piece> handed_out_;
  std::vector<size_t> pick_;
  std::vector<int64_t> src_chunk_;
};

}  // namespace reshard::plan_detail
