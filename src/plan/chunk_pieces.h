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

  // The pieces of the target chunk tuple `dst_chunk`, in row-major box order.
  const std::vector<Piece>& pieces_of(std::span<const int64_t> dst_chunk);

 private:
  struct DimOverlap {
    int64_t src_chunk = 0;
    Interval interval;
  };
  std::vector<Piece> cut(std::span<const int64_t> dst_chunk) const;

  DType dtype_;
  ChunkIndex src_index_;
  ChunkIndex dst_index_;
  // [dim][target chunk along dim] -> the source chunks it meets, in order.
  std::vector<std::vector<std::vector<DimOverlap>>> overlaps_;
  std::vector<std::optional<std::vector<Piece>>> pieces_;  // by target chunk tuple
};

}  // namespace reshard::plan_detail
