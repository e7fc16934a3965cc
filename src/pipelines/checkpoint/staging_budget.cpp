#include "pipelines/checkpoint/staging_budget.h"

#include <algorithm>

namespace reshard::pipelines_detail {

void StagingBudget::take(uint64_t bytes) {
  std::unique_lock lock(mutex_);
  const auto fits = [&] { return held_ == 0 || held_ + bytes <= budget_; };
  if (!fits()) {
    ++waits_;
    freed_.wait(lock, fits);
  }
  held_ += bytes;
  peak_ = std::max(peak_, held_);
}

bool StagingBudget::fits(uint64_t bytes) const {
  std::lock_guard lock(mutex_);
  return held_ == 0 || held_ + bytes <= budget_;
}

void StagingBudget::give(uint64_t bytes) {
  {
    std::lock_guard lock(mutex_);
    held_ -= std::min(held_, bytes);
  }
  freed_.notify_all();
}

uint64_t StagingBudget::peak() const {
  std::lock_guard lock(mutex_);
  return peak_;
}

uint64_t StagingBudget::waits() const {
  std::lock_guard lock(mutex_);
  return waits_;
}

uint64_t piece_bytes_for(uint64_t budget) { return std::clamp<uint64_t>(budget / 4, 1, uint64_t{64} << 20); }

std::vector<Box> contiguous_pieces(const Box& box, uint64_t element_bytes, uint64_t max_bytes) {
  const size_t rank = box.rank();
  const uint64_t max_elements = std::max<uint64_t>(1, max_bytes / std::max<uint64_t>(element_bytes, 1));
  if (box.empty() || static_cast<uint64_t>(box.volume()) <= max_elements) return {box};
  // The outermost dimension `d` whose rows (everything after it) fit: the
  // pieces step through the dimensions before it one index at a time, and
  // take as many of its rows as fit.
  size_t d = rank - 1;
  uint64_t inner = 1;  // elements of one index of dimension d
  while (d > 0 && inner * static_cast<uint64_t>(box.shape()[d]) <= max_elements) {
    inner *= static_cast<uint64_t>(box.shape()[d]);
    --d;
  }
  const auto step = static_cast<int64_t>(std::max<uint64_t>(1, max_elements / inner));
  std::vector<Box> pieces;
  std::vector<int64_t> index(d, 0);  // position in the dimensions before d, relative to the box
  while (true) {
    for (int64_t begin = 0; begin < box.shape()[d]; begin += step) {
      std::vector<int64_t> origin = box.origin();
      Shape extent = box.shape();
      for (size_t k = 0; k < d; ++k) {
        origin[k] += index[k];
        extent[k] = 1;
      }
      origin[d] += begin;
      extent[d] = std::min(step, box.shape()[d] - begin);
      pieces.emplace_back(std::move(origin), std::move(extent));
    }
    size_t k = d;
    while (k > 0 && ++index[k - 1] == box.shape()[k - 1]) index[--k] = 0;
    if (k == 0) break;
  }
  return pieces;
}

}  // namespace reshard::pipelines_detail
