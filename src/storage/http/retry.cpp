#include "storage/http/retry.h"

#include <algorithm>
#include <charconv>
#include <random>
#include <thread>

namespace reshard::storage_detail {
namespace {

// How long the server asked us to wait (Retry-After in seconds), if it did.
std::optional<std::chrono::milliseconds> retry_after(const HttpResponse& response) {
  const std::optional<std::string> value = response.header("retry-after");
  if (!value) return std::nullopt;
  long seconds = 0;
  const auto [end, error] = std::from_chars(value->data(), value->data() + value->size(), seconds);
  if (error != std::errc() || seconds < 0) return std::nullopt;
  return std::chrono::seconds(std::min(seconds, 60L));
}

}  // namespace

bool is_retryable(const HttpResponse& response) {
  if (response.permanent) return false;
  return response.status == 0 || response.status == 408 || response.status == 429 || response.status >= 500;
}

HttpResponse send_with_retries(const RetryPolicy& policy, const std::function<HttpResponse()>& attempt,
                               int* attempts) {
  using Clock = std::chrono::steady_clock;
  thread_local std::minstd_rand random(std::random_device{}());
  std::optional<Clock::time_point> first_failure;
  std::chrono::milliseconds ceiling = policy.first_backoff;
  int tries = 0;
  while (true) {
    HttpResponse response = attempt();
    ++tries;
    if (attempts != nullptr) *attempts = tries;
    if (!is_retryable(response)) return response;
    const Clock::time_point now = Clock::now();
    if (!first_failure) first_failure = now;
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(now - *first_failure);
    if (spent >= policy.timeout) return response;
    // Full jitter: a random wait up to the ceiling, so that many processes
    // failing together do not retry together.
    std::uniform_int_distribution<long> pick(0, std::max<long>(1, ceiling.count()));
    std::chrono::milliseconds wait(pick(random));
    if (const auto asked = retry_after(response)) wait = std::max(wait, *asked);
    wait = std::min(wait, policy.timeout - spent);
    std::this_thread::sleep_for(wait);
    ceiling = std::min(policy.max_backoff, ceiling * 2);
  }
}

}  // namespace reshard::storage_detail
