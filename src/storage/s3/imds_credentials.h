// Credentials of the instance's IAM role from the EC2 instance metadata
// service, IMDSv2 (a session token first), as botocore fetches them.
#pragma once

#include <chrono>
#include <string>

#include "storage/s3/aws_credentials.h"

namespace reshard::storage_detail {

// http://169.254.169.254, or AWS_EC2_METADATA_SERVICE_ENDPOINT.
std::string imds_endpoint();

// Asks the service at `endpoint` for the role's credentials, each request
// given up after `timeout` (botocore's is 1 s: off EC2 nothing answers).
// Throws Error(kAccessDenied) saying why when there are none.
AwsCredentials fetch_imds_credentials(const std::string& endpoint,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(1));

// "2024-05-01T12:00:00Z" (the service's Expiration), nullopt when malformed.
std::optional<std::chrono::system_clock::time_point> parse_iso8601_utc(std::string_view text);

}  // namespace reshard::storage_detail
