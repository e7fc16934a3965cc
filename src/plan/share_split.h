// Internal to the planner: a shared piece cut into the parts its holder processes send.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reshard/layout/box.h"

namespace reshard::plan_detail {

// Holder `holder` of a group sends rows [begin, end) of a piece along the
// piece's cut dimension.
struct RowRange {
  size_t holder = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

// The dimension a piece is cut along: its outermost one longer than 1, or its
// rank when it has none (the piece then goes whole to one holder).
size_t cut_dimension(const Box& piece);

// A piece that occupies bytes [begin, begin + bytes) of its group's total,
// where holder j of the group sends bytes [ends[j - 1], ends[j]) (ends[-1] is
// 0): the holders' parts, in order, as row ranges along cut_dimension(), each
// cut at the row nearest its byte boundary (so a part can be a row larger or
// smaller than its share, and an empty one is left out). The parts tile the
// piece exactly.
void split_by_shares(const Box& piece, uint64_t begin, uint64_t bytes, std::span<const uint64_t> ends,
                     std::vector<RowRange>& parts);

// Rows `range` of `piece` along dimension `dim` (the whole piece if dim is its rank).
Box rows_of(const Box& piece, size_t dim, const RowRange& range);

}  // namespace reshard::plan_detail
