// AWS Signature Version 4 for S3, by our own code: a pure function of the
// request, the credentials, the region and the time, so that it can be checked
// against AWS's published examples and against botocore.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "storage/http/http_client.h"
#include "storage/s3/digests.h"
#include "storage/s3/aws_credentials.h"

namespace reshard::storage_detail {

// Query parameters as names and values before encoding ("uploads" has "").
using QueryParams = std::vector<std::pair<std::string, std::string>>;

struct SigningInput {
  std::string method;          // "GET", "PUT", ...
  std::string canonical_uri;   // the path exactly as sent, already encoded ("/bucket/a%20b")
  QueryParams query;           // sent as canonical_query(query)
  Headers headers;             // every header to sign, host included, as they are sent
  std::string payload_sha256;  // hex SHA-256 of the body
};

// The query string as sent and as signed: names and values percent-encoded
// (RFC 3986 unreserved kept), sorted by name then value, "name=value" joined
// by '&'.
std::string canonical_query(const QueryParams& query);

// The object key as a URI path: each byte but the unreserved ones and '/'
// percent-encoded once (S3 does not encode twice, nor normalise the path).
std::string s3_uri_path(std::string_view key);

// The canonical request of the SigV4 documentation, signing exactly
// `request.headers` (sign_v4 adds its x-amz-* headers before calling it).
std::string canonical_request(const SigningInput& request);

// "20130524T000000Z".
std::string amz_date(std::chrono::system_clock::time_point when);

// The headers to add to `request` to sign it: x-amz-date, x-amz-content-sha256,
// x-amz-security-token (with a session token) and authorization. Headers of
// those names in `request.headers` are replaced, as botocore does. Every
// other header of the request is signed.
Headers sign_v4(const SigningInput& request, const AwsCredentials& credentials, std::string_view region,
                std::chrono::system_clock::time_point now);

}  // namespace reshard::storage_detail
