// Signs S3 requests with reshard's Signature V4 code, for sigv4_vs_botocore.py.
// Reads one JSON request a line on stdin:
//   {"method", "endpoint", "path_style", "bucket", "key", "query": [[name, value], ...],
//    "headers": [[name, value], ...], "body_hex", "access_key", "secret_key", "token",
//    "region", "time" (seconds since 1970)}
// and prints one JSON object a line: the headers signing adds, by lower-case
// name, and "host" (the Host header sent).
#include <chrono>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "reshard/layout/error.h"
#include "storage/s3/s3_endpoint.h"
#include "storage/s3/sigv4.h"

namespace {

using namespace reshard::storage_detail;

std::string from_hex(const std::string& text) {
  std::string out;
  for (size_t i = 0; i + 1 < text.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16)));
  return out;
}

nlohmann::json sign_one(const nlohmann::json& in) {
  S3Endpoint endpoint = parse_s3_endpoint(in.at("endpoint").get<std::string>());
  endpoint.path_style = in.at("path_style").get<bool>();
  endpoint.region = in.at("region").get<std::string>();
  const S3Target target = s3_target(endpoint, in.at("bucket").get<std::string>(), in.at("key").get<std::string>());

  SigningInput request;
  request.method = in.at("method").get<std::string>();
  request.canonical_uri = target.canonical_uri;
  for (const auto& pair : in.at("query"))
    request.query.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<std::string>());
  for (const auto& pair : in.at("headers")) {
    request.headers.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<std::string>());
  }
  request.headers.emplace_back("host", target.host);
  request.payload_sha256 = sha256_hex(from_hex(in.at("body_hex").get<std::string>()));

  AwsCredentials credentials;
  credentials.access_key_id = in.at("access_key").get<std::string>();
  credentials.secret_access_key = in.at("secret_key").get<std::string>();
  credentials.session_token = in.value("token", std::string());
  const auto when = std::chrono::system_clock::time_point(std::chrono::seconds(in.at("time").get<int64_t>()));

  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, value] : sign_v4(request, credentials, endpoint.region, when)) out[name] = value;
  out["host"] = target.host;
  out["url"] = target.url_without_query;
  return out;
}

}  // namespace

int main() {
  std::string line;
  int failures = 0;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    try {
      std::cout << sign_one(nlohmann::json::parse(line)).dump() << "\n";
    } catch (const std::exception& error) {
      std::cout << nlohmann::json{{"error", error.what()}}.dump() << "\n";
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
