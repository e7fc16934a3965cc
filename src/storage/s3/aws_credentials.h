// One set of AWS credentials, and where it came from: error messages name the
// source when a store refuses them, never the secret.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace reshard::storage_detail {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: long-term credentials
  // Where these came from, for messages ("profile 'x' in /root/.aws/credentials").
  std::string source;
  // When temporary credentials (the instance metadata service's) stop working.
  std::optional<std::chrono::system_clock::time_point> expiration;
};

}  // namespace reshard::storage_detail
