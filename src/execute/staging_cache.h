// StagingCache: staging buffers kept for reuse from one exchange to the next.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "reshard/execute/buffer.h"

namespace reshard::execute_detail {

// Messages that are not one contiguous run are packed into, or received into,
// a staging buffer. A fresh large buffer costs a page fault per page, and the
// kernel zeroing each page costs about as much as the copy itself, so freed
// staging buffers are kept, up to a bound, for later messages of the same
// size (messages are mostly the message size). Thread-safe.
class StagingCache {
 public:
  explicit StagingCache(size_t max_kept_bytes) : max_kept_bytes_(max_kept_bytes) {}

  // A buffer of exactly `size` bytes: a kept one if there is one.
  Buffer take(size_t size);

  // Keeps `buffer` for reuse, dropping the least recently given back ones to
  // stay within the bound (a buffer larger than the bound is not kept). The
  // caller must hold no other reference to its memory.
  void give_back(Buffer buffer);

  // Bytes and buffers kept now; the bound.
  size_t kept_bytes() const;
  size_t kept_buffers() const;
  size_t max_kept_bytes() const;
  // Lowering the bound drops the least recently given back buffers at once.
  void set_max_kept_bytes(size_t bytes);

  // The process's cache (cached_memory_limit() at most).
  static StagingCache& for_process();

 private:
  mutable std::mutex mutex_;
  size_t max_kept_bytes_;
  size_t kept_bytes_ = 0;
  std::vector<Buffer> kept_;  // least recently given back first
};

}  // namespace reshard::execute_detail
