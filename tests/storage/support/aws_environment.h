// Environment variables for the S3 tests: set for one test, restored after it,
// so that a developer's own AWS settings (~/.aws, AWS_PROFILE) never leak in
// and no test's settings leak out.
#pragma once

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace reshard::testing {

class ScopedAwsEnvironment {
 public:
  // Saves every variable the S3 driver reads (and HOME, which tests may
  // change), then clears them and points the shared files at paths that do
  // not exist.
  ScopedAwsEnvironment() {
    for (const char* name : kNames) {
      const char* value = std::getenv(name);
      saved_[name] = value == nullptr ? std::nullopt : std::optional<std::string>(value);
      if (std::string_view(name) != "HOME") ::unsetenv(name);
    }
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/reshard-test/credentials", 1);
    ::setenv("AWS_CONFIG_FILE", "/nonexistent/reshard-test/config", 1);
    ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
  }
  ~ScopedAwsEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }
  ScopedAwsEnvironment(const ScopedAwsEnvironment&) = delete;
  ScopedAwsEnvironment& operator=(const ScopedAwsEnvironment&) = delete;

  static void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }
  static void unset(const char* name) { ::unsetenv(name); }

 private:
  static constexpr const char* kNames[] = {
      "HOME", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
      "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
      "AWS_ENDPOINT_URL_S3", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_EC2_METADATA_DISABLED",
      "AWS_EC2_METADATA_SERVICE_ENDPOINT", "RESHARD_S3_ADDRESSING"};
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace reshard::testing
