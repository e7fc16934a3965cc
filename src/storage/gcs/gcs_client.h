// One GCS endpoint with its credentials: builds the JSON API's URLs and sends
// every request through the retry policy, with a fresh Authorization header
// on each attempt.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "reshard/layout/error.h"
#include "storage/gcs/gcs_credentials.h"
#include "storage/gcs/gcs_endpoint.h"
#include "storage/http/http_client.h"
#include "storage/http/retry.h"

namespace reshard::storage_detail {

class GcsClient {
 public:
  GcsClient(GcsEndpoint endpoint, std::shared_ptr<GcsCredentials> credentials, std::chrono::milliseconds timeout);

  // Sends `request` (its URL and body as given) until a response that is not
  // retryable or the timeout passes; a 401 fetches a new token once. Errors
  // come only from the credentials; what the store answers is returned.
  HttpResponse send(const HttpRequest& request, int* attempts = nullptr) const;

  // ENDPOINT/storage/v1/b/BUCKET
  std::string bucket_url(std::string_view bucket) const;
  // ENDPOINT/storage/v1/b/BUCKET/o/KEY (the key encoded, '/' included)
  std::string object_url(std::string_view bucket, std::string_view key) const;
  // ENDPOINT/upload/storage/v1/b/BUCKET/o
  std::string upload_url(std::string_view bucket) const;

  // gcs_error() with this client's endpoint and credential source.
  Error error(const HttpResponse& response, std::string_view place) const;

  const GcsEndpoint& endpoint() const { return endpoint_; }
  std::chrono::milliseconds timeout() const { return policy_.timeout; }

 private:
  GcsEndpoint endpoint_;
  std::shared_ptr<GcsCredentials> credentials_;
  RetryPolicy policy_;
  HttpClient http_;
};

// "gs://bucket/key" (or "gs://bucket" for the root), for messages.
std::string gs_url(std::string_view bucket, std::string_view key);

}  // namespace reshard::storage_detail
