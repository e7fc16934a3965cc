// The signed assertion a service account trades for an access token
// (RFC 7523, as Google's OAuth 2.0 server takes it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace reshard::storage_detail {

// The fields of a service-account key file that the assertion needs.
struct ServiceAccountKey {
  std::string client_email;
  std::string private_key;     // PEM (PKCS#8 or PKCS#1)
  std::string private_key_id;  // the JWT header's "kid"
  std::string token_uri;
};

// The read-write scope over every bucket the account may reach.
inline constexpr std::string_view kGcsReadWriteScope = "https://www.googleapis.com/auth/devstorage.read_write";

// An RS256 JWT: header {"alg":"RS256","typ":"JWT","kid":...}, claims iss,
// scope, aud (the token URI), iat = `now_seconds`, exp = iat + 3600, each part
// base64url without padding. Error(kInvalidConfig) when the key does not load
// (the message never holds the key).
std::string service_account_assertion(const ServiceAccountKey& key, int64_t now_seconds);

// Base64url without padding (RFC 4648 section 5), as JWTs use it.
std::string base64url(std::string_view bytes);

}  // namespace reshard::storage_detail
