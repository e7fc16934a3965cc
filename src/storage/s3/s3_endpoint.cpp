#include "storage/s3/s3_endpoint.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "storage/ascii_lower.h"
#include "storage/s3/aws_config_file.h"
#include "storage/s3/sigv4.h"

namespace reshard::storage_detail {
namespace {

bool is_true(const std::optional<std::string>& value) { return value && ascii_lower(*value) == "true"; }

// Whether `bucket` can be the first label of a host name (and so of a TLS
// certificate's wildcard): no dots, no upper case, no underscores.
bool dns_label(std::string_view bucket) {
  if (bucket.empty() || bucket.size() > 63 || bucket.front() == '-' || bucket.back() == '-') return false;
  return std::all_of(bucket.begin(), bucket.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// The Host header curl would send: the port only when it is not the scheme's default.
std::string host_header(const S3Endpoint& endpoint, std::string_view authority) {
  std::string host = ascii_lower(authority);
  const std::string default_port = endpoint.scheme == "https" ? ":443" : ":80";
  if (host.ends_with(default_port)) host.resize(host.size() - default_port.size());
  return host;
}

}  // namespace

S3Endpoint parse_s3_endpoint(std::string_view url) {
  S3Endpoint endpoint;
  const size_t colon = url.find("://");
  endpoint.scheme = colon == std::string_view::npos ? "" : ascii_lower(url.substr(0, colon));
  if (endpoint.scheme != "http" && endpoint.scheme != "https") {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("the S3 endpoint {:?} is not an http:// or https:// URL", std::string(url)));
  }
  std::string_view rest = url.substr(colon + 3);
  const size_t slash = rest.find_first_of("/?#");
  endpoint.authority = std::string(rest.substr(0, slash));
  if (endpoint.authority.empty() || endpoint.authority.find('@') != std::string::npos) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("the S3 endpoint {:?} needs a host (and no user name)", std::string(url)));
  }
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    path = path.substr(0, path.find_first_of("?#"));
    while (path.ends_with('/')) path.remove_suffix(1);
    endpoint.base_path = std::string(path);
  }
  endpoint.custom = true;
  return endpoint;
}

S3Endpoint resolve_s3_endpoint(const storage::StoreOptions& options) {
  const AwsConfigPaths paths = aws_config_paths();
  const std::optional<AwsProfile> profile = config_file_profile(paths);
  const auto from_profile = [&](std::string_view key) {
    return profile ? profile->get(key) : std::nullopt;
  };

  std::optional<std::string> region_setting = environment("AWS_REGION");
  if (!region_setting) region_setting = environment("AWS_DEFAULT_REGION");
  if (!region_setting) region_setting = from_profile("region");
  std::string region = region_setting.value_or("us-east-1");

  std::optional<std::string> url;
  if (!options.s3_endpoint.empty()) url = options.s3_endpoint;
  if (!url && !is_true(environment("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")) &&
      !is_true(from_profile("ignore_configured_endpoint_urls"))) {
    url = environment("AWS_ENDPOINT_URL_S3");
    if (!url) url = environment("AWS_ENDPOINT_URL");
    if (!url && profile) url = profile->get("s3", "endpoint_url");
    if (!url) url = from_profile("endpoint_url");
  }
  S3Endpoint endpoint;
  if (url) {
    endpoint = parse_s3_endpoint(*url);
  } else {
    endpoint.scheme = "https";
    endpoint.authority = fmt::format("s3.{}.amazonaws.com", region);
    endpoint.custom = false;
  }
  endpoint.region = std::move(region);

  endpoint.path_style = endpoint.custom;
  std::optional<std::string> style = environment("RESHARD_S3_ADDRESSING");
  const char* style_source = "RESHARD_S3_ADDRESSING";
  if (!style && profile) {
    style = profile->get("s3", "addressing_style");
    style_source = "the AWS profile's s3 addressing_style";
    if (style && ascii_lower(*style) == "auto") style.reset();
  }
  if (style) {
    const std::string value = ascii_lower(*style);
    if (value != "path" && value != "virtual") {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} is {:?}: it takes \"path\" or \"virtual\"", style_source, *style));
    }
    endpoint.path_style = value == "path";
  }
  return endpoint;
}

S3Target s3_target(const S3Endpoint& endpoint, std::string_view bucket, std::string_view key) {
  const std::string path = key.empty() ? std::string() : fmt::format("/{}", s3_uri_path(key));
  S3Target target;
  if (endpoint.path_style || !dns_label(bucket)) {
    target.canonical_uri = fmt::format("{}/{}{}", endpoint.base_path, bucket, path);
    target.host = host_header(endpoint, endpoint.authority);
    target.url_without_query = fmt::format("{}://{}{}", endpoint.scheme, endpoint.authority, target.canonical_uri);
  } else {
    target.canonical_uri = endpoint.base_path + (path.empty() ? "/" : path);
    const std::string authority = fmt::format("{}.{}", bucket, endpoint.authority);
    target.host = host_header(endpoint, authority);
    target.url_without_query = fmt::format("{}://{}{}", endpoint.scheme, authority, target.canonical_uri);
  }
  return target;
}

}  // namespace reshard::storage_detail
