#include "staging_cache.h"

#include <algorithm>

namespace reshard {

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
  if (buffer.size() == 0 || buffer.size() > max_kept_bytes_) return;
  std::lock_guard<std::mutex> guard(mutex_);
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

size_t StagingCache::kept_buffers() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return kept_.size();
}

StagingCache& StagingCache::for_process() {
  static StagingCache cache(size_t{256} << 20);
  return cache;
}

}  // namespace reshard
