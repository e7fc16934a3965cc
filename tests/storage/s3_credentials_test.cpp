// Where the S3 driver finds credentials, a region and an endpoint: the
// environment, the shared files under a temporary HOME, and the instance
// metadata service (IMDSv2) played by a test HTTP server on 127.0.0.1.
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reshard/storage/storage_error.h"
#include "storage/s3/aws_config_file.h"
#include "storage/s3/credential_chain.h"
#include "storage/s3/imds_credentials.h"
#include "storage/s3/s3_endpoint.h"
#include "storage/support/aws_environment.h"
#include "storage/support/test_http_server.h"
#include "storage/support/unused_port.h"
#include "support/temp_dir.h"

namespace reshard::storage_detail {
namespace {

using testing::ScopedAwsEnvironment;
using testing::TempDir;

// A fake instance metadata service: answers the IMDSv2 token PUT and the
// credential GETs (only with the session token), with keys numbered as told.
class FakeMetadataService {
 public:
  FakeMetadataService() : server_([this](const testing::ReceivedRequest& request) { return answer(request); }) {}

  std::string endpoint() const { return server_.url(); }
  std::vector<testing::ReceivedRequest> seen() const { return server_.requests(); }
  // What the credentials GET answers from now on.
  void answer_with(int number, std::string expiration) {
    const std::lock_guard lock(mutex_);
    key_number_ = number;
    expiration_ = std::move(expiration);
  }

  static constexpr const char* kToken = "imds-session-token";

 private:
  testing::CannedResponse answer(const testing::ReceivedRequest& request) {
    const std::string credentials = "/latest/meta-data/iam/security-credentials/";
    if (request.method == "PUT" && request.target == "/latest/api/token") {
      if (request.header("x-aws-ec2-metadata-token-ttl-seconds").empty()) return {400, "", "text/plain"};
      return {200, kToken, "text/plain"};
    }
    if (request.header("x-aws-ec2-metadata-token") != kToken) return {401, "", "text/plain"};
    if (request.method == "GET" && request.target == credentials) return {200, "test-role", "text/plain"};
    if (request.method == "GET" && request.target == credentials + "test-role") {
      const std::lock_guard lock(mutex_);
      const std::string n = std::to_string(key_number_);
      return {200,
              "{\"Code\": \"Success\", \"Type\": \"AWS-HMAC\", \"AccessKeyId\": \"ASIAIMDS" + n +
                  "\", \"SecretAccessKey\": \"imds-secret-" + n + "\", \"Token\": \"imds-token-" + n +
                  "\", \"Expiration\": \"" + expiration_ + "\"}"};
    }
    return {404, "", "text/plain"};
  }

  std::mutex mutex_;
  int key_number_ = 1;
  std::string expiration_ = "2999-01-01T00:00:00Z";
  testing::TestHttpServer server_;  // last: stopped before the rest goes
};

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

class S3Credentials : public ::testing::Test {
 protected:
  S3Credentials() {
    ScopedAwsEnvironment::set("HOME", home_.path().string());
    ScopedAwsEnvironment::unset("AWS_SHARED_CREDENTIALS_FILE");
    ScopedAwsEnvironment::unset("AWS_CONFIG_FILE");
  }
  std::filesystem::path credentials_file() const { return home_ / ".aws/credentials"; }
  std::filesystem::path config_file() const { return home_ / ".aws/config"; }

  ScopedAwsEnvironment environment_;
  TempDir home_;
};

TEST_F(S3Credentials, EnvironmentComesFirst) {
  write_file(credentials_file(), "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = file-secret\n");
  ScopedAwsEnvironment::set("AWS_ACCESS_KEY_ID", "ENVKEY");
  ScopedAwsEnvironment::set("AWS_SECRET_ACCESS_KEY", "env-secret");
  ScopedAwsEnvironment::set("AWS_SESSION_TOKEN", "env-token");
  const AwsCredentials found = find_aws_credentials();
  EXPECT_EQ(found.access_key_id, "ENVKEY");
  EXPECT_EQ(found.secret_access_key, "env-secret");
  EXPECT_EQ(found.session_token, "env-token");
  EXPECT_EQ(found.source, "environment variables AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY");
  EXPECT_FALSE(found.expiration);
}

TEST_F(S3Credentials, HalfAPairInTheEnvironmentIsAnError) {
  ScopedAwsEnvironment::set("AWS_ACCESS_KEY_ID", "ENVKEY");
  try {
    find_aws_credentials();
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), storage::kAccessDenied);
    EXPECT_NE(std::string(error.what()).find("AWS_SECRET_ACCESS_KEY"), std::string::npos) << error.what();
  }
}

TEST_F(S3Credentials, DefaultProfileInTheCredentialsFile) {
  write_file(credentials_file(),
             "# a comment\n[other]\naws_access_key_id = OTHER\naws_secret_access_key = other-secret\n\n"
             "[default]\n; another comment\nAWS_Access_Key_Id=DEFKEY\naws_secret_access_key: def/secret+key==\n");
  const AwsCredentials found = find_aws_credentials();
  EXPECT_EQ(found.access_key_id, "DEFKEY");
  EXPECT_EQ(found.secret_access_key, "def/secret+key==");
  EXPECT_EQ(found.session_token, "");
  EXPECT_EQ(found.source, "profile 'default' in " + credentials_file().string());
}

TEST_F(S3Credentials, NamedProfileFromAwsProfile) {
  write_file(credentials_file(),
             "[default]\naws_access_key_id = DEFKEY\naws_secret_access_key = def-secret\n"
             "[dev]\naws_access_key_id = DEVKEY\naws_secret_access_key = dev-secret\naws_session_token = dev-token\n");
  ScopedAwsEnvironment::set("AWS_PROFILE", "dev");
  const AwsCredentials found = find_aws_credentials();
  EXPECT_EQ(found.access_key_id, "DEVKEY");
  EXPECT_EQ(found.session_token, "dev-token");
  EXPECT_EQ(found.source, "profile 'dev' in " + credentials_file().string());

  ScopedAwsEnvironment::set("AWS_PROFILE", "missing");
  try {
    find_aws_credentials();
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), storage::kAccessDenied);
    EXPECT_NE(std::string(error.what()).find("profile 'missing'"), std::string::npos) << error.what();
  }
}

TEST_F(S3Credentials, ConfigFileAndOverriddenPaths) {
  // The config file's section is "[profile NAME]"; the credentials file wins over it.
  const std::filesystem::path config = home_ / "elsewhere/my-config";
  const std::filesystem::path credentials = home_ / "elsewhere/my-credentials";
  write_file(config, "[profile dev]\naws_access_key_id = CFGKEY\naws_secret_access_key = cfg-secret\n"
                     "[dev]\naws_access_key_id = WRONG\naws_secret_access_key = wrong\n");
  ScopedAwsEnvironment::set("AWS_CONFIG_FILE", config.string());
  ScopedAwsEnvironment::set("AWS_SHARED_CREDENTIALS_FILE", credentials.string());
  ScopedAwsEnvironment::set("AWS_PROFILE", "dev");
  AwsCredentials found = find_aws_credentials();
  EXPECT_EQ(found.access_key_id, "CFGKEY");
  EXPECT_EQ(found.source, "profile 'dev' in " + config.string());

  write_file(credentials, "[dev]\naws_access_key_id = CREDKEY\naws_secret_access_key = cred-secret\n");
  found = find_aws_credentials();
  EXPECT_EQ(found.access_key_id, "CREDKEY");
  EXPECT_EQ(found.source, "profile 'dev' in " + credentials.string());
  // "~/" in the overriding paths is HOME.
  ScopedAwsEnvironment::set("AWS_SHARED_CREDENTIALS_FILE", "~/elsewhere/my-credentials");
  EXPECT_EQ(find_aws_credentials().access_key_id, "CREDKEY");
}

TEST_F(S3Credentials, NestedSectionsAndComments) {
  const auto sections = parse_aws_ini(
      "[profile x]\r\nregion = eu-west-2\r\ns3 =\r\n  endpoint_url = http://127.0.0.1:9000\r\n"
      "  addressing_style = path\r\n# comment\r\nendpoint_url = https://general\r\n[default]\nregion=us-west-1\n");
  ASSERT_EQ(sections.count("profile x"), 1u);
  const AwsProfile& x = sections.at("profile x");
  EXPECT_EQ(x.get("region"), "eu-west-2");
  EXPECT_EQ(x.get("s3", "endpoint_url"), "http://127.0.0.1:9000");
  EXPECT_EQ(x.get("s3", "addressing_style"), "path");
  EXPECT_EQ(x.get("endpoint_url"), "https://general");
  EXPECT_EQ(x.get("s3"), std::nullopt);
  EXPECT_EQ(sections.at("default").get("region"), "us-west-1");
}

TEST_F(S3Credentials, RegionEndpointAndAddressing) {
  // Nothing set: AWS in us-east-1, virtual-hosted.
  S3Endpoint endpoint = resolve_s3_endpoint({});
  EXPECT_EQ(endpoint.region, "us-east-1");
  EXPECT_EQ(endpoint.url(), "https://s3.us-east-1.amazonaws.com");
  EXPECT_FALSE(endpoint.path_style);

  write_file(config_file(), "[default]\nregion = eu-west-2\nendpoint_url = http://general:1\n"
                            "[profile dev]\nregion = ap-south-1\nendpoint_url = http://general:2\n"
                            "s3 =\n  endpoint_url = http://s3-only:3\n  addressing_style = virtual\n");
  endpoint = resolve_s3_endpoint({});
  EXPECT_EQ(endpoint.region, "eu-west-2");
  EXPECT_EQ(endpoint.url(), "http://general:1");
  EXPECT_TRUE(endpoint.path_style);  // a custom endpoint

  ScopedAwsEnvironment::set("AWS_PROFILE", "dev");
  endpoint = resolve_s3_endpoint({});
  EXPECT_EQ(endpoint.region, "ap-south-1");
  EXPECT_EQ(endpoint.url(), "http://s3-only:3");  // the s3 sub-section's endpoint first
  EXPECT_FALSE(endpoint.path_style);              // its addressing_style

  ScopedAwsEnvironment::set("AWS_DEFAULT_REGION", "us-west-2");
  EXPECT_EQ(resolve_s3_endpoint({}).region, "us-west-2");
  ScopedAwsEnvironment::set("AWS_REGION", "ca-central-1");
  EXPECT_EQ(resolve_s3_endpoint({}).region, "ca-central-1");

  ScopedAwsEnvironment::set("AWS_ENDPOINT_URL", "http://env-general:4");
  EXPECT_EQ(resolve_s3_endpoint({}).url(), "http://env-general:4");
  ScopedAwsEnvironment::set("AWS_ENDPOINT_URL_S3", "http://env-s3:5");
  EXPECT_EQ(resolve_s3_endpoint({}).url(), "http://env-s3:5");
  storage::StoreOptions options;
  options.s3_endpoint = "http://option:6";
  EXPECT_EQ(resolve_s3_endpoint(options).url(), "http://option:6");

  ScopedAwsEnvironment::set("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true");
  EXPECT_EQ(resolve_s3_endpoint({}).url(), "https://s3.ca-central-1.amazonaws.com");
  EXPECT_EQ(resolve_s3_endpoint(options).url(), "http://option:6");

  ScopedAwsEnvironment::set("RESHARD_S3_ADDRESSING", "path");
  EXPECT_TRUE(resolve_s3_endpoint({}).path_style);
  ScopedAwsEnvironment::set("RESHARD_S3_ADDRESSING", "virtual");
  EXPECT_FALSE(resolve_s3_endpoint(options).path_style);
  ScopedAwsEnvironment::set("RESHARD_S3_ADDRESSING", "sideways");
  EXPECT_THROW(resolve_s3_endpoint({}), Error);
}

TEST_F(S3Credentials, InstanceMetadataServiceV2) {
  FakeMetadataService service;
  ScopedAwsEnvironment::unset("AWS_EC2_METADATA_DISABLED");
  ScopedAwsEnvironment::set("AWS_EC2_METADATA_SERVICE_ENDPOINT", service.endpoint() + "/");
  const AwsCredentials found = find_aws_credentials();
  EXPECT_EQ(found.access_key_id, "ASIAIMDS1");
  EXPECT_EQ(found.secret_access_key, "imds-secret-1");
  EXPECT_EQ(found.session_token, "imds-token-1");
  EXPECT_NE(found.source.find("the instance metadata service"), std::string::npos) << found.source;
  ASSERT_TRUE(found.expiration);
  EXPECT_EQ(*found.expiration, parse_iso8601_utc("2999-01-01T00:00:00Z"));

  const std::vector<testing::ReceivedRequest> seen = service.seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].method, "PUT");
  EXPECT_EQ(seen[0].header("x-aws-ec2-metadata-token-ttl-seconds"), "21600");
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].method, "GET");
    EXPECT_EQ(seen[i].header("x-aws-ec2-metadata-token"), FakeMetadataService::kToken)
        << "request " << i << " without the session token";
  }
}

TEST_F(S3Credentials, ExpiringCredentialsAreCachedThenRefreshed) {
  FakeMetadataService service;
  ScopedAwsEnvironment::unset("AWS_EC2_METADATA_DISABLED");
  ScopedAwsEnvironment::set("AWS_EC2_METADATA_SERVICE_ENDPOINT", service.endpoint());
  CredentialChain chain;
  EXPECT_EQ(chain.get().access_key_id, "ASIAIMDS1");
  service.answer_with(2, "2999-01-01T00:00:00Z");
  EXPECT_EQ(chain.get().access_key_id, "ASIAIMDS1");  // cached: far from expiring
  EXPECT_EQ(service.seen().size(), 3u);

  // Credentials that expire in two minutes are replaced before each use.
  const std::time_t soon =
      std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() + std::chrono::minutes(2));
  std::tm utc{};
  gmtime_r(&soon, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  CredentialChain expiring;
  service.answer_with(3, text);
  EXPECT_EQ(expiring.get().access_key_id, "ASIAIMDS3");
  service.answer_with(4, text);
  EXPECT_EQ(expiring.get().access_key_id, "ASIAIMDS4");
}

TEST_F(S3Credentials, MetadataServiceDisabled) {
  FakeMetadataService service;
  ScopedAwsEnvironment::set("AWS_EC2_METADATA_SERVICE_ENDPOINT", service.endpoint());
  ScopedAwsEnvironment::set("AWS_EC2_METADATA_DISABLED", "TRUE");
  EXPECT_THROW(find_aws_credentials(), Error);
  EXPECT_TRUE(service.seen().empty());
}

TEST_F(S3Credentials, NoCredentialsListsEverySourceTried) {
  ScopedAwsEnvironment::unset("AWS_EC2_METADATA_DISABLED");
  const std::string nowhere = testing::unanswered_endpoint();
  ScopedAwsEnvironment::set("AWS_EC2_METADATA_SERVICE_ENDPOINT", nowhere);
  write_file(config_file(), "[default]\nregion = eu-west-2\n");  // a profile without credentials
  const auto start = std::chrono::steady_clock::now();
  try {
    find_aws_credentials();
    FAIL() << "no error";
  } catch (const Error& error) {
    const std::string text = error.what();
    EXPECT_EQ(error.kind(), storage::kAccessDenied);
    EXPECT_NE(text.find("no AWS credentials"), std::string::npos) << text;
    EXPECT_NE(text.find("environment variables AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"), std::string::npos) << text;
    EXPECT_NE(text.find("profile 'default' in " + credentials_file().string()), std::string::npos) << text;
    EXPECT_NE(text.find("profile 'default' in " + config_file().string()), std::string::npos) << text;
    EXPECT_NE(text.find("the instance metadata service at " + nowhere), std::string::npos) << text;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace reshard::storage_detail
