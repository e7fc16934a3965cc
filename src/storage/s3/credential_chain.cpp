#include "storage/s3/credential_chain.h"

#include <vector>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/storage_error.h"
#include "storage/ascii_lower.h"
#include "storage/s3/aws_config_file.h"
#include "storage/s3/imds_credentials.h"

namespace reshard::storage_detail {
namespace {

// Temporary credentials are replaced this long before they expire, so that
// no request is signed with credentials about to lapse.
constexpr std::chrono::minutes kRefreshAhead{5};

[[noreturn]] void partial(std::string_view source, std::string_view has, std::string_view lacks) {
  throw Error(storage::kAccessDenied, fmt::format("{} has {} but no {}", source, has, lacks));
}

std::optional<AwsCredentials> from_environment(std::vector<std::string>& tried) {
  const auto key = environment("AWS_ACCESS_KEY_ID");
  const auto secret = environment("AWS_SECRET_ACCESS_KEY");
  const std::string source = "environment variables AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY";
  if (!key && !secret) {
    tried.push_back(source + " (not set)");
    return std::nullopt;
  }
  if (!secret) partial("the environment", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY");
  if (!key) partial("the environment", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID");
  return AwsCredentials{*key, *secret, environment("AWS_SESSION_TOKEN").value_or(""), source, std::nullopt};
}

std::optional<AwsCredentials> from_profile(const std::optional<AwsProfile>& profile, const std::string& source,
                                           std::vector<std::string>& tried) {
  const auto key = profile ? profile->get("aws_access_key_id") : std::nullopt;
  const auto secret = profile ? profile->get("aws_secret_access_key") : std::nullopt;
  if (!key && !secret) {
    tried.push_back(source + (profile ? " (no aws_access_key_id)" : " (no such file or profile)"));
    return std::nullopt;
  }
  if (!secret) partial(source, "aws_access_key_id", "aws_secret_access_key");
  if (!key) partial(source, "aws_secret_access_key", "aws_access_key_id");
  return AwsCredentials{*key, *secret, profile->get("aws_session_token").value_or(""), source, std::nullopt};
}

bool metadata_disabled() {
  const auto value = environment("AWS_EC2_METADATA_DISABLED");
  if (!value) return false;
  return ascii_lower(*value) == "true";
}

}  // namespace

AwsCredentials find_aws_credentials() {
  std::vector<std::string> tried;
  if (auto found = from_environment(tried)) return *found;

  const AwsConfigPaths paths = aws_config_paths();
  const auto in_credentials = credentials_file_profile(paths);
  const auto in_config = config_file_profile(paths);
  if (paths.profile_from_environment && !in_credentials && !in_config) {
    throw Error(storage::kAccessDenied,
                fmt::format("AWS_PROFILE names profile '{}', which is in neither {} nor {}", paths.profile,
                            paths.credentials_file.string(), paths.config_file.string()));
  }
  const auto source = [&](const std::filesystem::path& file) {
    return fmt::format("profile '{}' in {}", paths.profile, file.string());
  };
  if (auto found = from_profile(in_credentials, source(paths.credentials_file), tried)) return *found;
  if (auto found = from_profile(in_config, source(paths.config_file), tried)) return *found;

  const std::string endpoint = imds_endpoint();
  if (metadata_disabled()) {
    tried.push_back(fmt::format("the instance metadata service at {} (AWS_EC2_METADATA_DISABLED=true)", endpoint));
  } else {
    try {
      return fetch_imds_credentials(endpoint);
    } catch (const Error& error) {
      tried.push_back(fmt::format("the instance metadata service at {} ({})", endpoint, error.what()));
    }
  }
  std::string list;
  for (const std::string& source_tried : tried) list += fmt::format("\n  {}", source_tried);
  throw Error(storage::kAccessDenied, fmt::format("no AWS credentials found for S3; tried:{}", list));
}

AwsCredentials CredentialChain::get() {
  const std::lock_guard lock(mutex_);
  const auto now = std::chrono::system_clock::now();
  if (cached_ && (!cached_->expiration || now < *cached_->expiration - kRefreshAhead)) return *cached_;
  try {
    cached_ = find_aws_credentials();
  } catch (const Error&) {
    // A failed refresh keeps credentials that still work a little longer.
    if (!cached_ || !cached_->expiration || now >= *cached_->expiration) throw;
  }
  return *cached_;
}

std::optional<AwsCredentials> CredentialChain::last() {
  const std::lock_guard lock(mutex_);
  return cached_;
}

}  // namespace reshard::storage_detail
