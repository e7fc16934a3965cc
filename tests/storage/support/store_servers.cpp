#include "storage/support/store_servers.h"

#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace reshard::testing {
namespace {

const nlohmann::json& state() {
  static const nlohmann::json loaded = [] {
    const char* path = std::getenv("RESHARD_TEST_STORE_STATE");
    if (path == nullptr || *path == '\0') {
      throw std::runtime_error(
          "RESHARD_TEST_STORE_STATE is not set: run these tests through ctest (its storage_servers fixture "
          "starts the S3 and GCS test servers), or start them with tests/storage/servers/store_servers.py");
    }
    std::ifstream in(path);
    if (!in) throw std::runtime_error(std::string("cannot read the test servers' state file ") + path);
    return nlohmann::json::parse(in);
  }();
  return loaded;
}

std::vector<std::string> strings(const nlohmann::json& array) {
  std::vector<std::string> out;
  for (const auto& item : array) out.push_back(item.get<std::string>());
  return out;
}

}  // namespace

const S3Server& s3_server() {
  static const S3Server server = [] {
    const nlohmann::json& s3 = state().at("s3");
    return S3Server{s3.at("endpoint").get<std::string>(), s3.at("access_key").get<std::string>(),
                    s3.at("secret_key").get<std::string>(), s3.value("region", std::string("us-east-1")),
                    strings(s3.at("buckets"))};
  }();
  return server;
}

const GcsServer& gcs_server() {
  static const GcsServer server = [] {
    const nlohmann::json& gcs = state().at("gcs");
    return GcsServer{gcs.at("endpoint").get<std::string>(), strings(gcs.at("buckets"))};
  }();
  return server;
}

void point_environment_at_servers() {
  const S3Server& s3 = s3_server();
  const GcsServer& gcs = gcs_server();
  ::setenv("AWS_ACCESS_KEY_ID", s3.access_key.c_str(), 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key.c_str(), 1);
  ::setenv("AWS_REGION", s3.region.c_str(), 1);
  ::setenv("AWS_ENDPOINT_URL", s3.endpoint.c_str(), 1);
  ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
  ::unsetenv("AWS_PROFILE");
  ::unsetenv("AWS_SESSION_TOKEN");
  ::setenv("STORAGE_EMULATOR_HOST", gcs.endpoint.c_str(), 1);
}

std::string unique_prefix() {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = test != nullptr ? std::string(test->test_suite_name()) + "-" + test->name() : "test";
  for (char& c : name) {
    if (c == '/') c = '-';
  }
  static std::mt19937_64 random(std::random_device{}());
  return name + "-" + std::to_string(random() % 1000000000);
}

}  // namespace reshard::testing
