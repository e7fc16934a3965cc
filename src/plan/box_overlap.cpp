#include "plan/box_overlap.h"

#include <algorithm>
#include <vector>

namespace reshard::plan_detail {
namespace {

using Indices = std::vector<size_t>;

std::pair<size_t, size_t> ordered(size_t a, size_t b) { return {std::min(a, b), std::max(a, b)}; }

class OverlapFinder {
 public:
  explicit OverlapFinder(std::span<const Box> boxes) : boxes_(boxes) {}

  // Boxes in `ids` all overlap along dimensions [0, dim); look at the rest.
  std::optional<std::pair<size_t, size_t>> find(Indices ids, size_t dim) const {
    if (ids.size() < 2) return std::nullopt;
    if (dim == boxes_[ids[0]].rank()) return ordered(ids[0], ids[1]);
    std::sort(ids.begin(), ids.end(), [&](size_t a, size_t b) { return begin(a, dim) < begin(b, dim); });
    if (dim + 1 == boxes_[ids[0]].rank()) return adjacent_overlap(ids, dim);
    return sweep(ids, dim);
  }

 private:
  int64_t begin(size_t i, size_t dim) const { return boxes_[i].origin()[dim]; }
  int64_t end(size_t i, size_t dim) const { return boxes_[i].origin()[dim] + boxes_[i].shape()[dim]; }

  // Intervals sorted by begin overlap somewhere iff two neighbours do.
  std::optional<std::pair<size_t, size_t>> adjacent_overlap(const Indices& ids, size_t dim) const {
    for (size_t k = 0; k + 1 < ids.size(); ++k) {
      if (begin(ids[k + 1], dim) < end(ids[k], dim)) return ordered(ids[k], ids[k + 1]);
    }
    return std::nullopt;
  }

  // Walks the begins along `dim` in order, keeping the boxes that span the
  // current position. Two boxes overlapping along `dim` are both active where
  // the later one begins, so the active set is re-examined (one dimension
  // further) exactly when boxes join it.
  std::optional<std::pair<size_t, size_t>> sweep(const Indices& ids, size_t dim) const {
    Indices active;
    size_t next = 0;
    while (next < ids.size()) {
      const int64_t position = begin(ids[next], dim);
      std::erase_if(active, [&](size_t i) { return end(i, dim) <= position; });
      while (next < ids.size() && begin(ids[next], dim) == position) active.push_back(ids[next++]);
      if (auto found = find(active, dim + 1)) return found;
    }
    return std::nullopt;
  }

  std::span<const Box> boxes_;
};

}  // namespace

std::optional<std::pair<size_t, size_t>> find_overlap(std::span<const Box> boxes) {
  Indices non_empty;
  for (size_t i = 0; i < boxes.size(); ++i) {
    if (!boxes[i].empty()) non_empty.push_back(i);
  }
  return OverlapFinder(boxes).find(std::move(non_empty), 0);
}

}  // namespace reshard::plan_detail
