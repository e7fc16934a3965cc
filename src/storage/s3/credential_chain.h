// Where S3 credentials come from, in botocore's order: the environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), the profile
// (AWS_PROFILE, else "default") in the shared credentials file, then in the
// config file, then the instance metadata service (unless
// AWS_EC2_METADATA_DISABLED=true). Not supported: assume-role, SSO,
// credential_process, web identity and container credentials.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>

#include "storage/s3/aws_credentials.h"

namespace reshard::storage_detail {

// The first source that has credentials, read now. Error(kAccessDenied) when
// none has, listing every source tried and why it had none, or when a source
// has half a pair (a key id without its secret).
AwsCredentials find_aws_credentials();

// find_aws_credentials, once: temporary credentials are fetched again a few
// minutes before they expire. Thread safe.
class CredentialChain {
 public:
  AwsCredentials get();
  // The credentials last handed out, without looking for new ones: what
  // error messages name (by source) and scrub (the secrets) after a failure.
  std::optional<AwsCredentials> last();

 private:
  std::mutex mutex_;
  std::optional<AwsCredentials> cached_;
};

}  // namespace reshard::storage_detail
