#include "share_split.h"

#include <algorithm>

namespace reshard::plan_detail {
namespace {

__extension__ typedef unsigned __int128 Wide;  // bytes x rows can exceed 64 bits

// The row of an `rows`-row piece of `bytes` bytes nearest to byte `offset`.
int64_t nearest_row(uint64_t offset, uint64_t bytes, int64_t rows) {
  const Wide scaled = static_cast<Wide>(offset) * static_cast<Wide>(rows) * 2 + bytes;
  return static_cast<int64_t>(scaled / (static_cast<Wide>(bytes) * 2));
}

}  // namespace

size_t cut_dimension(const Box& piece) {
  size_t dim = 0;
  while (dim < piece.rank() && piece.shape()[dim] <= 1) ++dim;
  return dim;
}

void split_by_shares(const Box& piece, uint64_t begin, uint64_t bytes, std::span<const uint64_t> ends,
                     std::vector<RowRange>& parts) {
  parts.clear();
  const size_t dim = cut_dimension(piece);
  const int64_t rows = dim < piece.rank() ? piece.shape()[dim] : 1;
  const uint64_t end = begin + bytes;
  uint64_t holder_begin = 0;
  for (size_t j = 0; j < ends.size(); holder_begin = ends[j++]) {
    const uint64_t from = std::max(begin, holder_begin);
    const uint64_t to = std::min(end, ends[j]);
    if (from >= to) continue;
    if (from == begin && to == end) {  // the common case: all of it from one holder
      parts.push_back({j, 0, rows});
      return;
    }
    const int64_t first = nearest_row(from - begin, bytes, rows);
    const int64_t last = nearest_row(to - begin, bytes, rows);
    if (first < last) parts.push_back({j, first, last});
  }
}

Box rows_of(const Box& piece, size_t dim, const RowRange& range) {
  if (dim == piece.rank()) return piece;
  std::vector<int64_t> origin = piece.origin();
  Shape shape = piece.shape();
  origin[dim] += range.begin;
  shape[dim] = range.end - range.begin;
  return Box(std::move(origin), std::move(shape));
}

}  // namespace reshard::plan_detail
