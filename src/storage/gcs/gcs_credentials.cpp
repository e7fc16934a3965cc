#include "storage/gcs/gcs_credentials.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reshard/storage/storage_error.h"
#include "storage/gcs/gcs_oauth.h"
#include "storage/http/retry.h"

namespace reshard::storage_detail {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// What every token request needs: a client, a retry policy, and the source.
struct TokenContext {
  std::shared_ptr<HttpClient> http;
  RetryPolicy policy;
  std::string source;
};

std::shared_ptr<HttpClient> token_client(std::chrono::milliseconds timeout,
                                         std::chrono::milliseconds connect = std::chrono::seconds(20)) {
  HttpClientOptions options;
  options.stall_timeout = timeout;
  options.connect_timeout = std::min(connect, timeout);
  return std::make_shared<HttpClient>(options);
}

// A credential file's JSON. Its text never reaches a message: a parse error
// names only the byte where the file stops being JSON.
nlohmann::json read_credential_file(const fs::path& path, std::string_view from) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(ErrorCode::kInvalidConfig, fmt::format("{} names {}, which cannot be read", from, path.string()));
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    nlohmann::json json = nlohmann::json::parse(text.str());
    if (!json.is_object()) throw Error(ErrorCode::kInvalidConfig, "");
    return json;
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(ErrorCode::kInvalidConfig,
                fmt::format("{} ({}) is not JSON (it stops being JSON at byte {})", path.string(), from, e.byte));
  } catch (const Error&) {
    throw Error(ErrorCode::kInvalidConfig, fmt::format("{} ({}) is not a JSON object", path.string(), from));
  }
}

std::string field(const nlohmann::json& json, std::string_view name, const fs::path& path, bool required = true) {
  const auto it = json.find(name);
  if (it == json.end() || !it->is_string() || it->get<std::string>().empty()) {
    if (!required) return {};
    throw Error(ErrorCode::kInvalidConfig,
                fmt::format("the credential file {} has no {:?} field", path.string(), std::string(name)));
  }
  return it->get<std::string>();
}

std::shared_ptr<GcsCredentials> from_file(const fs::path& path, std::string_view from,
                                          std::chrono::milliseconds timeout) {
  const nlohmann::json json = read_credential_file(path, from);
  const std::string type = field(json, "type", path);
  const std::string token_uri_or_default = [&] {
    std::string uri = field(json, "token_uri", path, false);
    return uri.empty() ? std::string(kGoogleTokenUri) : uri;
  }();
  auto http = token_client(timeout);
  const RetryPolicy policy{timeout};
  if (type == "service_account") {
    ServiceAccountKey key{field(json, "client_email", path), field(json, "private_key", path),
                          field(json, "private_key_id", path, false), token_uri_or_default};
    std::string source = fmt::format("the service account key file {} ({})", path.string(), from);
    auto tokens = std::make_shared<TokenCache>([http, policy, key, source] {
      return fetch_service_account_token(*http, policy, key, source);
    });
    return std::make_shared<GcsCredentials>(std::move(source), std::move(tokens));
  }
  if (type == "authorized_user") {
    AuthorizedUser user{field(json, "client_id", path), field(json, "client_secret", path),
                        field(json, "refresh_token", path), token_uri_or_default};
    std::string source = fmt::format("the authorized user file {} ({})", path.string(), from);
    auto tokens = std::make_shared<TokenCache>([http, policy, user, source] {
      return fetch_authorized_user_token(*http, policy, user, source);
    });
    return std::make_shared<GcsCredentials>(std::move(source), std::move(tokens));
  }
  throw Error(ErrorCode::kUnsupported,
              fmt::format("the credential file {} ({}) is of type {:?}; reshard reads \"service_account\" and "
                          "\"authorized_user\" files",
                          path.string(), from, type));
}

// gcloud's file: $CLOUDSDK_CONFIG, else ~/.config/gcloud.
fs::path gcloud_adc_path() {
  const std::string config = env("CLOUDSDK_CONFIG");
  if (!config.empty()) return fs::path(config) / "application_default_credentials.json";
  const std::string home = env("HOME");
  if (home.empty()) return {};
  return fs::path(home) / ".config" / "gcloud" / "application_default_credentials.json";
}

std::shared_ptr<GcsCredentials> from_metadata_server(std::chrono::milliseconds timeout, std::string tried) {
  std::string host = env("GCE_METADATA_HOST");
  const bool named = !host.empty();
  if (!named) host = "metadata.google.internal";
  std::string source =
      fmt::format("the metadata server at {} ({})", host, named ? "GCE_METADATA_HOST" : "Google Cloud's default");
  // Off Google Cloud there is no metadata server: do not wait long for it.
  auto http = token_client(timeout, std::chrono::seconds(2));
  const RetryPolicy first_policy{std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(3))};
  const RetryPolicy policy{timeout};
  auto answered = std::make_shared<std::atomic<bool>>(false);
  auto tokens = std::make_shared<TokenCache>([=] {
    if (answered->load()) return fetch_metadata_token(*http, policy, host, source);
    try {
      AccessToken token = fetch_metadata_token(*http, first_policy, host, source);
      answered->store(true);
      return token;
    } catch (const Error& e) {
      if (e.kind() != storage::kStoreUnreachable) throw;
      throw Error(storage::kAccessDenied,
                  fmt::format("no Google Cloud credentials found: {}; and {}. Set GOOGLE_APPLICATION_CREDENTIALS "
                              "to a service account key file, run `gcloud auth application-default login`, or "
                              "run on Google Cloud",
                              tried, e.what()));
    }
  });
  return std::make_shared<GcsCredentials>(std::move(source), std::move(tokens));
}

}  // namespace

std::shared_ptr<GcsCredentials> GcsCredentials::none() {
  return std::make_shared<GcsCredentials>("no credentials (STORAGE_EMULATOR_HOST is set)", nullptr);
}

std::shared_ptr<GcsCredentials> GcsCredentials::from_environment(std::chrono::milliseconds timeout) {
  const std::string named = env("GOOGLE_APPLICATION_CREDENTIALS");
  if (!named.empty()) return from_file(named, "GOOGLE_APPLICATION_CREDENTIALS", timeout);
  const fs::path gcloud = gcloud_adc_path();
  std::error_code error;
  if (!gcloud.empty() && fs::exists(gcloud, error)) {
    return from_file(gcloud, "gcloud's application default credentials", timeout);
  }
  const std::string tried =
      gcloud.empty() ? std::string("GOOGLE_APPLICATION_CREDENTIALS is not set; neither CLOUDSDK_CONFIG nor HOME is set")
                     : fmt::format("GOOGLE_APPLICATION_CREDENTIALS is not set; gcloud's {} does not exist",
                                   gcloud.string());
  return from_metadata_server(timeout, tried);
}

std::optional<std::string> GcsCredentials::authorization() {
  if (!tokens_) return std::nullopt;
  return "Bearer " + tokens_->get();
}

void GcsCredentials::invalidate() {
  if (tokens_) tokens_->invalidate();
}

}  // namespace reshard::storage_detail
