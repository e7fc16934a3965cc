// Host memory for staging copies, shared by the thread that stages and the
// one that writes: bytes are taken before a copy is made and given back once
// it is written, so what is staged at once stays within the budget.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "reshard/layout/box.h"

namespace reshard::pipelines_detail {

class StagingBudget {
 public:
  explicit StagingBudget(uint64_t bytes) : budget_(bytes) {}

  // Blocks until `bytes` fit beside what is held (a request larger than the
  // whole budget waits until nothing is held), then holds them.
  void take(uint64_t bytes);
  // Whether take(bytes) would return without waiting.
  bool fits(uint64_t bytes) const;
  // Gives back bytes taken earlier.
  void give(uint64_t bytes);

  // The most bytes held at once so far.
  uint64_t peak() const;
  // How many take() calls had to wait for a give().
  uint64_t waits() const;

 private:
  const uint64_t budget_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  uint64_t held_ = 0;
  uint64_t peak_ = 0;
  uint64_t waits_ = 0;
};

// The largest piece a stager makes under `budget`: small enough that
// several pieces are in flight at once (one written while the next is
// staged), and never more than 64 MiB, so that writing starts early.
uint64_t piece_bytes_for(uint64_t budget);

// `box` cut into boxes whose bytes (of `element_bytes` each) are contiguous
// in the box's dense row-major layout, in that order, each of at most
// `max_bytes` bytes (or one element, when an element is larger).
std::vector<Box> contiguous_pieces(const Box& box, uint64_t element_bytes, uint64_t max_bytes);

}  // namespace reshard::pipelines_detail
