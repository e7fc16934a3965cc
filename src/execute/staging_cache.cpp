#include "staging_cache.h"

#include "reshard/execute/cached_memory.h"

#include <algorithm>

namespace reshard::execute_detail {

Buffer StagingCache::take(size_t size) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = std::find_if(kept_.rbegin(), kept_.rend(), [&](const Buffer& b) { return b.size() == size; });
    if (it != kept_.rend()) {
      Buffer reused = std::move(*it);
      kept_.erase(std::next(it).base());
      kept_bytes_ -= size;
      return reused;
    }
  }
  return Buffer::allocate(size);
}

void StagingCache::give_back(Buffer buffer) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (buffer.size() == 0 || buffer.size() > max_kept_bytes_) return;
  while (kept_bytes_ + buffer.size() > max_kept_bytes_) {
    kept_bytes_ -= kept_.front().size();
    kept_.erase(kept_.begin());
  }
  kept_bytes_ += buffer.size();
  kept_.push_back(std::move(buffer));
}

size_t StagingCache::kept_bytes() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return kept_bytes_;
}

size_t StagingCache::max_kept_bytes() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return max_kept_bytes_;
}

void StagingCache::set_max_kept_bytes(size_t bytes) {
  std::vector<Buffer> dropped;  // freed after the lock is let go
  std::lock_guard<std::mutex> guard(mutex_);
  max_kept_bytes_ = bytes;
  while (kept_bytes_ > max_kept_bytes_) {
    kept_bytes_ -= kept_.front().size();
    dropped.push_back(std::move(kept_.front()));
    kept_.erase(kept_.begin());
  }
}

size_t StagingCache::kept_buffers() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return kept_.size();
}

StagingCache& StagingCache::for_process() {
  static StagingCache cache(static_cast<size_t>(cached_memory_limit()));
  return cache;
}

}  // namespace reshard::execute_detail
