// One S3 request, done right: addressed (path or virtual-hosted style),
// signed afresh for each attempt, retried with backoff, and its failure
// turned into an error of storage_error.h that names "s3://bucket/key" and
// never a credential, a token, a signature or the query string.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "storage/http/http_client.h"
#include "storage/s3/credential_chain.h"
#include "storage/s3/s3_endpoint.h"
#include "storage/s3/sigv4.h"

namespace reshard::storage_detail {

struct S3Request {
  std::string method = "GET";
  std::string bucket;
  std::string key;  // empty: the bucket itself
  QueryParams query;
  Headers headers;  // sent and signed (range, if-none-match, ...)
  std::span<const std::byte> body;
  std::span<std::byte> body_into;  // see HttpRequest::body_into
  // CompleteMultipartUpload may answer 200 and then an <Error>: retried as a 5xx.
  bool error_in_ok_body = false;
};

// "s3://bucket/key" ("s3://bucket" for the bucket).
std::string s3_url(std::string_view bucket, std::string_view key);

class S3Client {
 public:
  explicit S3Client(const storage::StoreOptions& options);

  // Sends `request` until the store gives an answer that is not to be
  // retried, and returns it. Error(kStoreUnreachable) when none came, or the
  // store kept asking for retries, for the retry budget (`timeout`, else the
  // store's); Error(kAccessDenied) when there are no credentials. `attempts`
  // counts the tries.
  HttpResponse send(const S3Request& request, int* attempts = nullptr,
                    std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // The error for a failed answer to `request`, `doing` saying what it was
  // ("reading"): kObjectNotFound, kBucketNotFound, kAccessDenied (naming
  // where the credentials came from) or kStoreError (status and S3 code).
  Error error(const S3Request& request, const HttpResponse& response, std::string_view doing);

  // `text` with the current credentials' secrets blotted out.
  std::string scrub(std::string text);

  const S3Endpoint& endpoint() const { return endpoint_; }
  const storage::StoreOptions& options() const { return options_; }

 private:
  storage::StoreOptions options_;
  S3Endpoint endpoint_;
  HttpClient http_;
  CredentialChain credentials_;
};

}  // namespace reshard::storage_detail
