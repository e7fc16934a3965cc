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
    : dtype_(dtype),
      src_index_(src),
      dst_index_(dst),
      pieces_(static_cast<size_t>(dst_index_.size())),
      takers_left_(static_cast<size_t>(dst_index_.size()), 0) {
  for (int64_t logical = 0; logical < dst.num_devices; ++logical) {
    ++takers_left_[static_cast<size_t>(dst_index_.of(dst.chunk_of_device(logical)))];
  }
  overlaps_.resize(dst.dims.size());
  for (size_t d = 0; d < dst.dims.size(); ++d) {
    for (const Interval& target : dst.dims[d].chunks) {
      overlaps_[d].push_back(overlaps_along<DimOverlap>(src.dims[d], target));
    }
  }
}

std::vector<Piece>& PieceFinder::take_pieces(std::span<const int64_t> dst_chunk) {
  const auto index = static_cast<size_t>(dst_index_.of(dst_chunk));
  std::optional<std::vector<Piece>>& cached = pieces_[index];
  const bool last_taker = --takers_left_[index] == 0;
  if (last_taker && cached) return *cached;  // nobody needs them after this
  if (last_taker) {
    cut(dst_chunk, handed_out_);  // the only taker: no need to keep a copy
    return handed_out_;
  }
  if (!cached) cut(dst_chunk, cached.emplace());
  handed_out_ = *cached;
  return handed_out_;
}

size_t PieceFinder::count_pieces(std::span<const int64_t> dst_chunk) const {
  size_t count = 1;
  for (size_t d = 0; d < dst_chunk.size(); ++d) count *= overlaps_[d][static_cast<size_t>(dst_chunk[d])].size();
  return count;
}

void PieceFinder::cut(std::span<const int64_t> dst_chunk, std::vector<Piece>& pieces) {
  const size_t rank = dst_chunk.size();
  pieces.clear();
  const size_t count = count_pieces(dst_chunk);
  if (count == 0) return;  // an empty target chunk (uneven) needs nothing
  pieces.reserve(count);
  pick_.assign(rank, 0);  // odometer over the per-dimension overlap lists
  src_chunk_.resize(rank);
  while (true) {
    // Sized up front: a Box built by push_back would cost twice the allocations.
    std::vector<int64_t> origin(rank);
    Shape shape(rank);
    for (size_t d = 0; d < rank; ++d) {
      const DimOverlap& o = overlaps_[d][static_cast<size_t>(dst_chunk[d])][pick_[d]];
      src_chunk_[d] = o.src_chunk;
      origin[d] = o.interval.begin;
      shape[d] = o.interval.size();
    }
    Box box(std::move(origin), std::move(shape));
    const uint64_t bytes = dtype_byte_size(dtype_, static_cast<uint64_t>(box.volume()));
    pieces.push_back({src_index_.of(src_chunk_), std::move(box), bytes});
    size_t d = rank;
    while (d > 0 && ++pick_[d - 1] == overlaps_[d - 1][static_cast<size_t>(dst_chunk[d - 1])].size()) pick_[--d] = 0;
    if (d == 0) return;
  }
}

}  // namespace reshard::plan_detail
