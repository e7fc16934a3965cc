#include "storage/gcs/gcs_token_cache.h"

namespace reshard::storage_detail {

std::string TokenCache::get() {
  const std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (token_.empty() || now >= refresh_at_) {
    AccessToken fresh = fetch_();
    token_ = std::move(fresh.value);
    refresh_at_ = now + fresh.lifetime - kRefreshMargin;
  }
  return token_;
}

void TokenCache::invalidate() {
  const std::lock_guard lock(mutex_);
  token_.clear();
}

}  // namespace reshard::storage_detail
