// Retrying requests the way the stores ask clients to: exponential backoff
// with full jitter on 408, 429, 5xx and dropped connections, honouring
// Retry-After, until the caller's timeout has passed without progress.
#pragma once

#include <chrono>
#include <functional>

#include "storage/http/http_client.h"

namespace reshard::storage_detail {

struct RetryPolicy {
  // Retries stop once this long has passed since the first failed attempt.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  std::chrono::milliseconds first_backoff{100};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(8)};
};

// Whether a store asks for the request to be tried again.
bool is_retryable(const HttpResponse& response);

// Runs `attempt` (which builds, signs and sends the request afresh each time)
// until it gives a response that is not retryable or the policy's time is
// spent; returns the last response. `attempts`, when given, counts the tries.
HttpResponse send_with_retries(const RetryPolicy& policy, const std::function<HttpResponse()>& attempt,
                               int* attempts = nullptr);

}  // namespace reshard::storage_detail
