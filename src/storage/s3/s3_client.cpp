#include "storage/s3/s3_client.h"

#include <algorithm>

#include <fmt/format.h>

#include "reshard/storage/storage_error.h"
#include "storage/http/retry.h"
#include "storage/s3/s3_xml.h"

namespace reshard::storage_detail {
namespace {

using Clock = std::chrono::steady_clock;

HttpClientOptions http_options(const storage::StoreOptions& options) {
  HttpClientOptions http;
  http.stall_timeout = options.timeout;
  http.connect_timeout = std::min<std::chrono::milliseconds>(options.timeout, std::chrono::seconds(20));
  return http;
}

void replace_all(std::string& text, std::string_view what, std::string_view with) {
  if (what.empty()) return;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + with.size())) {
    text.replace(at, what.size(), with);
  }
}

// The store's own words about a failure: "HTTP 503 (SlowDown: Please reduce your request rate)".
std::string status_text(const HttpResponse& response) {
  const std::optional<S3ErrorBody> body = parse_s3_error(response.body);
  if (!body || (body->code.empty() && body->message.empty())) return fmt::format("HTTP {}", response.status);
  std::string message = body->message.size() > 300 ? body->message.substr(0, 300) + "..." : body->message;
  return fmt::format("HTTP {} ({}{}{})", response.status, body->code, message.empty() ? "" : ": ", message);
}

std::string seconds(Clock::duration duration) {
  return fmt::format("{:.1f} s", std::chrono::duration<double>(duration).count());
}

}  // namespace

std::string s3_url(std::string_view bucket, std::string_view key) {
  return key.empty() ? fmt::format("s3://{}", bucket) : fmt::format("s3://{}/{}", bucket, key);
}

S3Client::S3Client(const storage::StoreOptions& options)
    : options_(options), endpoint_(resolve_s3_endpoint(options)), http_(http_options(options)) {}

HttpResponse S3Client::send(const S3Request& request, int* attempts, std::optional<std::chrono::milliseconds> timeout) {
  const S3Target target = s3_target(endpoint_, request.bucket, request.key);
  const std::string query = canonical_query(request.query);
  SigningInput signing{request.method, target.canonical_uri, request.query, request.headers, sha256_hex(request.body)};
  signing.headers.emplace_back("host", target.host);
  HttpRequest http{request.method,
                   query.empty() ? target.url_without_query : fmt::format("{}?{}", target.url_without_query, query),
                   {},
                   request.body,
                   request.body_into};

  const auto attempt = [&] {
    const AwsCredentials credentials = credentials_.get();
    http.headers = signing.headers;
    const Headers added = sign_v4(signing, credentials, endpoint_.region, std::chrono::system_clock::now());
    http.headers.insert(http.headers.end(), added.begin(), added.end());
    HttpResponse response = http_.send(http);
    if (request.error_in_ok_body && response.ok() && parse_s3_error(response.body)) response.status = 500;
    return response;
  };
  int tries = 0;
  const Clock::time_point start = Clock::now();
  HttpResponse response = send_with_retries(RetryPolicy{timeout.value_or(options_.timeout)}, attempt, &tries);
  if (attempts != nullptr) *attempts = tries;
  if (!is_retryable(response)) return response;
  const std::string why = response.status == 0 ? fmt::format("did not answer ({})", response.transport_error)
                                               : fmt::format("kept failing with {}", status_text(response));
  throw Error(storage::kStoreUnreachable, scrub(fmt::format("{}: the S3 endpoint {} {}; tried {} times over {}",
                                                            s3_url(request.bucket, request.key), endpoint_.url(), why,
                                                            tries, seconds(Clock::now() - start))));
}

Error S3Client::error(const S3Request& request, const HttpResponse& response, std::string_view doing) {
  const std::string where = s3_url(request.bucket, request.key);
  const std::optional<S3ErrorBody> body = parse_s3_error(response.body);
  const std::string code = body ? body->code : std::string();
  // HEAD answers have no body: a 404 for the bucket itself is the bucket.
  if (response.status == 404 && (code == "NoSuchBucket" || (code.empty() && request.key.empty()))) {
    return Error(storage::kBucketNotFound,
                 fmt::format("s3://{}: no such bucket at {}", request.bucket, endpoint_.url()));
  }
  if (response.status == 404 && (code == "NoSuchKey" || (code.empty() && !request.key.empty()))) {
    return Error(storage::kObjectNotFound, fmt::format("{}: no such object", where));
  }
  if (response.status == 401 || response.status == 403) {
    const std::optional<AwsCredentials> credentials = credentials_.last();
    return Error(storage::kAccessDenied,
                 scrub(fmt::format("{}: {}: access denied, {}, to the credentials from {}", where, doing,
                                   status_text(response), credentials ? credentials->source : "no source")));
  }
  std::string text = fmt::format("{}: {}: the S3 store at {} answered {}", where, doing, endpoint_.url(),
                                 status_text(response));
  if (const auto region = response.header("x-amz-bucket-region"); region && *region != endpoint_.region) {
    text += fmt::format(" (the bucket is in region {}, not {}: set AWS_REGION)", *region, endpoint_.region);
  }
  return Error(storage::kStoreError, scrub(std::move(text)));
}

std::string S3Client::scrub(std::string text) {
  if (const std::optional<AwsCredentials> credentials = credentials_.last()) {
    replace_all(text, credentials->secret_access_key, "[secret]");
    replace_all(text, credentials->session_token, "[token]");
  }
  replace_all(text, "Signature=", "Signature[redacted]");
  return text;
}

}  // namespace reshard::storage_detail
