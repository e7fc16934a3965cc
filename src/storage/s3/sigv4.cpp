#include "storage/s3/sigv4.h"

#include <algorithm>
#include <array>
#include <ctime>
#include <map>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "storage/ascii_lower.h"

namespace reshard::storage_detail {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Trimall: no white space at either end, one space for each run inside.
std::string trim_all(std::string_view value) {
  std::string out;
  bool pending_space = false;
  for (const char c : value) {
    if (is_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

// Lower-cased names, sorted; repeated names' values joined by ',' in order.
std::map<std::string, std::string> canonical_headers(const Headers& headers) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : headers) {
    const std::string key = ascii_lower(trim_all(name));
    auto [it, inserted] = out.emplace(key, trim_all(value));
    if (!inserted) it->second += fmt::format(",{}", trim_all(value));
  }
  return out;
}

bool is_signing_header(std::string_view lower_name) {
  return lower_name == "authorization" || lower_name == "x-amz-date" || lower_name == "x-amz-content-sha256" ||
         lower_name == "x-amz-security-token";
}

}  // namespace

std::string canonical_query(const QueryParams& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query) encoded.emplace_back(uri_encode(name, false), uri_encode(value, false));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out.push_back('&');
    out += name;
    out.push_back('=');
    out += value;
  }
  return out;
}

std::string s3_uri_path(std::string_view key) { return uri_encode(key, true); }

std::string canonical_request(const SigningInput& request) {
  const std::map<std::string, std::string> headers = canonical_headers(request.headers);
  std::string names;
  std::string lines;
  for (const auto& [name, value] : headers) {
    if (!names.empty()) names.push_back(';');
    names += name;
    lines += fmt::format("{}:{}\n", name, value);
  }
  return fmt::format("{}\n{}\n{}\n{}\n{}\n{}", request.method,
                     request.canonical_uri.empty() ? "/" : request.canonical_uri, canonical_query(request.query), lines,
                     names, request.payload_sha256);
}

std::string amz_date(std::chrono::system_clock::time_point when) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  std::array<char, 32> text{};
  const size_t n = std::strftime(text.data(), text.size(), "%Y%m%dT%H%M%SZ", &utc);
  return std::string(text.data(), n);
}

Headers sign_v4(const SigningInput& request, const AwsCredentials& credentials, std::string_view region,
                std::chrono::system_clock::time_point now) {
  const std::string date_time = amz_date(now);
  const std::string date = date_time.substr(0, 8);
  Headers added{{"x-amz-date", date_time}, {"x-amz-content-sha256", request.payload_sha256}};
  if (!credentials.session_token.empty()) added.emplace_back("x-amz-security-token", credentials.session_token);

  SigningInput complete = request;
  std::erase_if(complete.headers, [](const auto& header) { return is_signing_header(ascii_lower(trim_all(header.first))); });
  complete.headers.insert(complete.headers.end(), added.begin(), added.end());
  const std::map<std::string, std::string> signed_headers = canonical_headers(complete.headers);
  std::string signed_names;
  for (const auto& entry : signed_headers) {
    if (!signed_names.empty()) signed_names.push_back(';');
    signed_names += entry.first;
  }

  const std::string scope = fmt::format("{}/{}/s3/aws4_request", date, region);
  const std::string string_to_sign =
      fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", date_time, scope, sha256_hex(canonical_request(complete)));
  const std::string secret = fmt::format("AWS4{}", credentials.secret_access_key);
  Sha256Digest key = hmac_sha256(std::span(reinterpret_cast<const unsigned char*>(secret.data()), secret.size()), date);
  key = hmac_sha256(key, region);
  key = hmac_sha256(key, "s3");
  key = hmac_sha256(key, "aws4_request");
  const std::string signature = hex(hmac_sha256(key, string_to_sign));

  added.emplace_back("authorization",
                     fmt::format("AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}",
                                 credentials.access_key_id, scope, signed_names, signature));
  return added;
}

}  // namespace reshard::storage_detail
