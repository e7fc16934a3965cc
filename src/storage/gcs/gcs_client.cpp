#include "storage/gcs/gcs_client.h"

#include <algorithm>

#include <fmt/format.h>

#include "storage/gcs/gcs_errors.h"

namespace reshard::storage_detail {
namespace {

HttpClientOptions http_options(std::chrono::milliseconds timeout) {
  HttpClientOptions options;
  options.stall_timeout = timeout;
  options.connect_timeout = std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(20));
  return options;
}

}  // namespace

GcsClient::GcsClient(GcsEndpoint endpoint, std::shared_ptr<GcsCredentials> credentials,
                     std::chrono::milliseconds timeout)
    : endpoint_(std::move(endpoint)),
      credentials_(std::move(credentials)),
      policy_{timeout},
      http_(http_options(timeout)) {}

HttpResponse GcsClient::send(const HttpRequest& request, int* attempts) const {
  bool refreshed = false;
  while (true) {
    HttpResponse response = send_with_retries(
        policy_,
        [&] {
          HttpRequest signed_request = request;
          if (const auto authorization = credentials_->authorization()) {
            signed_request.headers.emplace_back("Authorization", *authorization);
          }
          return http_.send(signed_request);
        },
        attempts);
    // A token the store no longer takes (revoked, or expired early): one more try with a new one.
    if (response.status != 401 || refreshed || !credentials_->has_tokens()) return response;
    credentials_->invalidate();
    refreshed = true;
  }
}

std::string GcsClient::bucket_url(std::string_view bucket) const {
  return fmt::format("{}/storage/v1/b/{}", endpoint_.url, uri_encode(bucket, false));
}

std::string GcsClient::object_url(std::string_view bucket, std::string_view key) const {
  return fmt::format("{}/o/{}", bucket_url(bucket), uri_encode(key, false));
}

std::string GcsClient::upload_url(std::string_view bucket) const {
  return fmt::format("{}/upload/storage/v1/b/{}/o", endpoint_.url, uri_encode(bucket, false));
}

Error GcsClient::error(const HttpResponse& response, std::string_view place) const {
  return gcs_error(response, place, endpoint_.url, credentials_->source());
}

std::string gs_url(std::string_view bucket, std::string_view key) {
  return key.empty() ? fmt::format("gs://{}", bucket) : fmt::format("gs://{}/{}", bucket, key);
}

}  // namespace reshard::storage_detail
