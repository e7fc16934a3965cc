// An OAuth 2.0 access token kept until a few minutes before it expires, so
// that no request goes out with a token about to lapse.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

namespace reshard::storage_detail {

// What a token endpoint hands out.
struct AccessToken {
  std::string value;
  std::chrono::seconds lifetime{0};  // the response's expires_in
};

class TokenCache {
 public:
  // google-auth's margin: a token with less than this left is fetched anew.
  static constexpr std::chrono::seconds kRefreshMargin{225};

  explicit TokenCache(std::function<AccessToken()> fetch) : fetch_(std::move(fetch)) {}

  // The cached token, or a fresh one from `fetch` (whose errors pass
  // through). Thread safe: one thread fetches while the others wait for it.
  std::string get();
  // Forgets the cached token (the store refused it).
  void invalidate();

 private:
  std::function<AccessToken()> fetch_;
  std::mutex mutex_;
  std::string token_;
  std::chrono::steady_clock::time_point refresh_at_;
};

}  // namespace reshard::storage_detail
