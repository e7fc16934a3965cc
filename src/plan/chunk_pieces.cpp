#include "chunk_pieces.h"

#include <algorithm>

namespace reshard::plan_detail {
namespace {

bool is_empty(Interval i) { return i.end <= i.begin; }

// The source chunks along one dimension that meet `target`, found by binary
// search (chunks are in increasing order; in uneven mode trailing ones may be
// empty and are skipped).
template <typename Overlap>
std::vector<Overlap> overlaps_along(const DimTiling& src, Interval target) {
  std::vector<Overlap> out;
  if (is_empty(target)) return out;
  const auto first = std::partition_point(src.chunks.begin(), src.chunks.end(),
                                          [&](const Interval& c) { return c.end <= target.begin; });
  for (auto it = first; it != src.chunks.end() && it->begin < target.end; ++it) {
    const Interval common = intersect(*it, target);
    if (!is_empty(common)) out.push_back({static_cast<int64_t>(it - src.chunks.begin()), common});
  }
  return out;
}

}  // namespace

ChunkIndex::ChunkIndex(const Tiling& tiling) {
  for (const DimTiling& dim : tiling.dims) {
    counts_.push_back(dim.num_chunks);
    size_ *= dim.num_chunks;  // at most the mesh size: axes split distinct dimensions
  }
}

int64_t ChunkIndex::of(std::span<const int64_t> chunk) const {
  int64_t index = 0;
  for (size_t d = 0; d < counts_.size(); ++d) index = index * counts_[d] + chunk[d];
  return index;
}

PieceFinder::PieceFinder(const Tiling& src, const Tiling& dst, DType dtype)
    : dtype_(dtype), src_index_(src), dst_index_(dst), pieces_(static_cast<size_t>(dst_index_.size())) {
  overlaps_.resize(dst.dims.size());
  for (size_t d = 0; d < dst.dims.size(); ++d) {
    for (const Interval& target : dst.dims[d].chunks) {
      overlaps_[d].push_back(overlaps_along<DimOverlap>(src.dims[d], target));
    }
  }
}

const std::vector<Piece>& PieceFinder::pieces_of(std::span<const int64_t> dst_chunk) {
  std::optional<std::vector<Piece>>& cached = pieces_[static_cast<size_t>(dst_index_.of(dst_chunk))];
  if (!cached) cached = cut(dst_chunk);
  return *cached;
}

std::vector<Piece> PieceFinder::cut(std::span<const int64_t> dst_chunk) const {
  const size_t rank = dst_chunk.size();
  std::vector<const std::vector<DimOverlap>*> lists(rank);
  for (size_t d = 0; d < rank; ++d) {
    lists[d] = &overlaps_[d][static_cast<size_t>(dst_chunk[d])];
    if (lists[d]->empty()) return {};  // an empty target chunk (uneven) needs nothing
  }
  std::vector<Piece> pieces;
  std::vector<size_t> pick(rank, 0);  // odometer over the per-dimension lists
  std::vector<int64_t> src_chunk(rank);
  std::vector<Interval> intervals(rank);
  while (true) {
    for (size_t d = 0; d < rank; ++d) {
      const DimOverlap& o = (*lists[d])[pick[d]];
      src_chunk[d] = o.src_chunk;
      intervals[d] = o.interval;
    }
    Box box = Box::from_intervals(intervals);
    const uint64_t bytes = dtype_byte_size(dtype_, static_cast<uint64_t>(box.volume()));
    pieces.push_back({src_index_.of(src_chunk), std::move(box), bytes});
    size_t d = rank;
    while (d > 0 && ++pick[d - 1] == lists[d - 1]->size()) pick[--d] = 0;
    if (d == 0) return pieces;
  }
}

}  // namespace reshard::plan_detail
