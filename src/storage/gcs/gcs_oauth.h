// Getting access tokens the three ways Application Default Credentials do:
// a service account's signed assertion, an authorized user's refresh token
// (both POSTed to the credential's token URI), and the metadata server.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "storage/gcs/gcs_jwt.h"
#include "storage/gcs/gcs_token_cache.h"
#include "storage/http/http_client.h"
#include "storage/http/retry.h"

namespace reshard::storage_detail {

// Google's token endpoint, for files that name none.
inline constexpr std::string_view kGoogleTokenUri = "https://oauth2.googleapis.com/token";

// The fields of an "authorized_user" credential file (gcloud's own).
struct AuthorizedUser {
  std::string client_id;
  std::string client_secret;
  std::string refresh_token;
  std::string token_uri;
};

// Each `source` says where the credential came from; it starts every error
// message. Refusals are Error(kAccessDenied), silence Error(kStoreUnreachable);
// no message holds a key, a secret, an assertion or a token.
AccessToken fetch_service_account_token(const HttpClient& http, const RetryPolicy& policy,
                                        const ServiceAccountKey& key, std::string_view source);
AccessToken fetch_authorized_user_token(const HttpClient& http, const RetryPolicy& policy,
                                        const AuthorizedUser& user, std::string_view source);
// GET http://HOST/computeMetadata/v1/instance/service-accounts/default/token
// with "Metadata-Flavor: Google"; `host` is "host[:port]".
AccessToken fetch_metadata_token(const HttpClient& http, const RetryPolicy& policy, std::string_view host,
                                 std::string_view source);

// `text` with every occurrence of each non-empty secret replaced by "<redacted>".
std::string redact(std::string text, std::initializer_list<std::string_view> secrets);

}  // namespace reshard::storage_detail
