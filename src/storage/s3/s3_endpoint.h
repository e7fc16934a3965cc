// Which S3 endpoint and region a store talks to, and how a bucket and a key
// become a URL there.
//
// Region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else
// us-east-1. Endpoint: StoreOptions::s3_endpoint, AWS_ENDPOINT_URL_S3,
// AWS_ENDPOINT_URL, the profile's `s3 =` endpoint_url, its endpoint_url, else
// https://s3.REGION.amazonaws.com (AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true
// skips the environment's and the profile's, as botocore does).
// Addressing: path style (http://host/bucket/key) for a custom endpoint,
// virtual-hosted (https://bucket.s3.REGION.amazonaws.com/key) for AWS unless
// the bucket name is no DNS label; the profile's `s3 = addressing_style` and,
// above it, RESHARD_S3_ADDRESSING=path|virtual override that choice.
#pragma once

#include <string>
#include <string_view>

#include "reshard/storage/open_store.h"

namespace reshard::storage_detail {

struct S3Endpoint {
  std::string scheme;     // "http" or "https"
  std::string authority;  // "host" or "host:port", as written
  std::string base_path;  // "" or "/prefix" (an endpoint behind a path), no trailing '/'
  std::string region;
  bool path_style = true;
  bool custom = false;  // not AWS's own endpoint

  // "http://127.0.0.1:8333": what messages name.
  std::string url() const { return scheme + "://" + authority + base_path; }
};

// The endpoint `options` and the environment (and the AWS profile) choose.
// Error(kInvalidArgument) for an endpoint that is no http(s) URL or an
// addressing switch that is neither "path" nor "virtual".
S3Endpoint resolve_s3_endpoint(const storage::StoreOptions& options);

// Parses "http(s)://host[:port][/path]".
S3Endpoint parse_s3_endpoint(std::string_view url);

// Where a request for `key` in `bucket` goes (an empty key: the bucket).
struct S3Target {
  std::string url_without_query;  // scheme, host and encoded path
  std::string host;               // the Host header: lower case, without a default port
  std::string canonical_uri;      // the encoded path, as signed
};
S3Target s3_target(const S3Endpoint& endpoint, std::string_view bucket, std::string_view key);

}  // namespace reshard::storage_detail
