// The object-store servers the storage tests run against: a SeaweedFS S3
// endpoint and a fake-gcs-server, started by the ctest fixture
// storage_servers (tests/storage/servers/store_servers.py), which writes their
// addresses and test credentials to the JSON file RESHARD_TEST_STORE_STATE
// names. A test that needs them fails, never skips, when they are not there.
#pragma once

#include <string>
#include <vector>

namespace reshard::testing {

struct S3Server {
  std::string endpoint;  // "http://127.0.0.1:PORT"
  std::string access_key;
  std::string secret_key;
  std::string region;
  std::vector<std::string> buckets;
};

struct GcsServer {
  std::string endpoint;  // "http://127.0.0.1:PORT"
  std::vector<std::string> buckets;
};

// The servers of this test run (fails the calling test via an exception when
// the state file is missing or lacks them).
const S3Server& s3_server();
const GcsServer& gcs_server();

// Sets the environment the way a user would point reshard at these servers:
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL and
// STORAGE_EMULATOR_HOST (and clears AWS_PROFILE, AWS_SESSION_TOKEN).
void point_environment_at_servers();

// A prefix no other test (or earlier run) uses: "<test name>-<random>".
std::string unique_prefix();

}  // namespace reshard::testing
