#include "storage/gcs/gcs_oauth.h"

#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reshard/storage/storage_error.h"

namespace reshard::storage_detail {
namespace {

std::span<const std::byte> bytes_of(const std::string& text) { return std::as_bytes(std::span(text)); }

// What a token endpoint's error body says (OAuth's "error" and
// "error_description", or Google's {"error": {"message"}}), at most a line.
std::string refusal_reason(const HttpResponse& response) {
  try {
    const nlohmann::json body = nlohmann::json::parse(response.body);
    std::string out;
    if (body.contains("error")) {
      const nlohmann::json& error = body["error"];
      out = error.is_string() ? error.get<std::string>() : error.value("message", std::string());
    }
    if (body.contains("error_description") && body["error_description"].is_string()) {
      out += ": " + body["error_description"].get<std::string>();
    }
    return out.substr(0, 300);
  } catch (const nlohmann::json::exception&) {
    return {};
  }
}

// Sends a token request with retries and reads the token from the answer.
AccessToken request_token(const HttpClient& http, const RetryPolicy& policy, const HttpRequest& request,
                          std::string_view source, std::string_view endpoint,
                          std::initializer_list<std::string_view> secrets) {
  const HttpResponse response = send_with_retries(policy, [&] { return http.send(request); });
  if (response.status == 0 || is_retryable(response)) {
    const std::string why = response.status == 0 ? response.transport_error
                                                 : fmt::format("HTTP {} {}", response.status, refusal_reason(response));
    throw Error(storage::kStoreUnreachable,
                redact(fmt::format("{}: the token endpoint {} did not answer: {}", source, endpoint, why), secrets));
  }
  if (!response.ok()) {
    throw Error(storage::kAccessDenied,
                redact(fmt::format("{}: refused by the token endpoint {}: HTTP {} {}", source, endpoint,
                                   response.status, refusal_reason(response)),
                       secrets));
  }
  try {
    const nlohmann::json body = nlohmann::json::parse(response.body);
    AccessToken token{body.at("access_token").get<std::string>(),
                      std::chrono::seconds(body.value("expires_in", int64_t{3600}))};
    if (token.value.empty()) throw Error(storage::kStoreError, "empty");
    return token;
  } catch (const std::exception&) {
    // Never the body itself: it holds the token when only another field is wrong.
    throw Error(storage::kStoreError,
                fmt::format("{}: the token endpoint {} answered without an access_token and expires_in", source,
                            endpoint));
  }
}

std::string form_encode(std::initializer_list<std::pair<std::string_view, std::string_view>> fields) {
  std::string out;
  for (const auto& [name, value] : fields) {
    if (!out.empty()) out += '&';
    out += uri_encode(name, false) + "=" + uri_encode(value, false);
  }
  return out;
}

HttpRequest form_post(const std::string& url, const std::string& body) {
  HttpRequest request;
  request.method = "POST";
  request.url = url;
  request.headers = {{"Content-Type", "application/x-www-form-urlencoded"}, {"Accept", "application/json"}};
  request.body = bytes_of(body);
  return request;
}

}  // namespace

std::string redact(std::string text, std::initializer_list<std::string_view> secrets) {
  for (const std::string_view secret : secrets) {
    if (secret.empty()) continue;
    for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
      text.replace(at, secret.size(), "<redacted>");
    }
  }
  return text;
}

AccessToken fetch_service_account_token(const HttpClient& http, const RetryPolicy& policy,
                                        const ServiceAccountKey& key, std::string_view source) {
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string assertion = service_account_assertion(key, now);
  const std::string body =
      form_encode({{"grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"}, {"assertion", assertion}});
  return request_token(http, policy, form_post(key.token_uri, body), source, key.token_uri,
                       {assertion, key.private_key});
}

AccessToken fetch_authorized_user_token(const HttpClient& http, const RetryPolicy& policy,
                                        const AuthorizedUser& user, std::string_view source) {
  const std::string body = form_encode({{"grant_type", "refresh_token"},
                                        {"client_id", user.client_id},
                                        {"client_secret", user.client_secret},
                                        {"refresh_token", user.refresh_token}});
  return request_token(http, policy, form_post(user.token_uri, body), source, user.token_uri,
                       {user.client_secret, user.refresh_token});
}

AccessToken fetch_metadata_token(const HttpClient& http, const RetryPolicy& policy, std::string_view host,
                                 std::string_view source) {
  HttpRequest request;
  request.url = fmt::format("http://{}/computeMetadata/v1/instance/service-accounts/default/token", host);
  request.headers = {{"Metadata-Flavor", "Google"}};
  return request_token(http, policy, request, source, fmt::format("http://{}", host), {});
}

}  // namespace reshard::storage_detail
