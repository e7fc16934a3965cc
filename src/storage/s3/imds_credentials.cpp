#include "storage/s3/imds_credentials.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reshard/layout/error.h"
#include "reshard/storage/storage_error.h"
#include "storage/http/http_client.h"
#include "storage/s3/aws_config_file.h"

namespace reshard::storage_detail {
namespace {

[[noreturn]] void fail(std::string_view why) { throw Error(storage::kAccessDenied, std::string(why)); }

std::string describe(const HttpResponse& response) {
  return response.status == 0 ? response.transport_error : fmt::format("HTTP {}", response.status);
}

}  // namespace

std::string imds_endpoint() {
  std::string endpoint = environment("AWS_EC2_METADATA_SERVICE_ENDPOINT").value_or("http://169.254.169.254");
  while (endpoint.ends_with('/')) endpoint.pop_back();
  return endpoint;
}

std::optional<std::chrono::system_clock::time_point> parse_iso8601_utc(std::string_view text) {
  std::tm utc{};
  const std::string copy(text);
  if (std::sscanf(copy.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &utc.tm_year, &utc.tm_mon, &utc.tm_mday, &utc.tm_hour,
                  &utc.tm_min, &utc.tm_sec) != 6) {
    return std::nullopt;
  }
  // system_clock counts nanoseconds in 64 bits: years past 2262 do not fit.
  utc.tm_year = std::min(utc.tm_year, 2200) - 1900;
  utc.tm_mon -= 1;
  return std::chrono::system_clock::from_time_t(timegm(&utc));
}

AwsCredentials fetch_imds_credentials(const std::string& endpoint, std::chrono::milliseconds timeout) {
  const HttpClient client(HttpClientOptions{timeout, timeout});
  // IMDSv2: a session token first. A service that does not know the PUT
  // (IMDSv1 only: 404 or 405) is asked without one, as botocore does.
  HttpRequest token_request{"PUT", endpoint + "/latest/api/token",
                            {{"x-aws-ec2-metadata-token-ttl-seconds", "21600"}}, {}, {}};
  const HttpResponse token = client.send(token_request);
  Headers with_token;
  if (token.ok()) {
    with_token.emplace_back("x-aws-ec2-metadata-token", token.body);
  } else if (token.status != 404 && token.status != 405) {
    fail(fmt::format("no session token ({})", describe(token)));
  }
  const std::string base = endpoint + "/latest/meta-data/iam/security-credentials/";
  const HttpResponse roles = client.send(HttpRequest{"GET", base, with_token, {}, {}});
  if (!roles.ok()) fail(fmt::format("no IAM role ({})", describe(roles)));
  const std::string role = roles.body.substr(0, roles.body.find('\n'));
  if (role.empty()) fail("the instance has no IAM role");
  const HttpResponse answer = client.send(HttpRequest{"GET", base + uri_encode(role, false), with_token, {}, {}});
  if (!answer.ok()) fail(fmt::format("no credentials for role '{}' ({})", role, describe(answer)));

  const nlohmann::json json = nlohmann::json::parse(answer.body, nullptr, false);
  if (!json.is_object() || json.value("Code", std::string("Success")) != "Success" ||
      !json.contains("AccessKeyId") || !json.contains("SecretAccessKey") || !json["AccessKeyId"].is_string() ||
      !json["SecretAccessKey"].is_string()) {
    fail(fmt::format("the answer for role '{}' holds no credentials", role));
  }
  AwsCredentials credentials;
  credentials.access_key_id = json["AccessKeyId"].get<std::string>();
  credentials.secret_access_key = json["SecretAccessKey"].get<std::string>();
  if (json.contains("Token") && json["Token"].is_string()) credentials.session_token = json["Token"].get<std::string>();
  if (json.contains("Expiration") && json["Expiration"].is_string()) {
    credentials.expiration = parse_iso8601_utc(json["Expiration"].get<std::string>());
  }
  credentials.source = fmt::format("the instance metadata service at {} (role '{}')", endpoint, role);
  return credentials;
}

}  // namespace reshard::storage_detail
