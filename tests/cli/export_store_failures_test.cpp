// `reshard export` into an object store when something is wrong: wrong
// credentials, a missing bucket, an existing destination, an endpoint that does
// not answer. Each is exit status 1 with a message naming what is at fault,
// nothing is written, and no output (stdout, stderr, RESHARD_LOG=debug
// included) ever holds a secret.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/support/run_reshard.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/storage/open_store.h"
#include "storage/support/store_servers.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_reshard;

// Sets an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class ExportStoreFailures : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::point_environment_at_servers();
    const std::vector<std::byte> w(16 * 16 * 4, std::byte{1});
    const safetensors::TensorData tensors[] = {{{"w", DType::kF32, {16, 16}}, w}};
    safetensors::write_file(local_ / "model.safetensors", tensors);
    std::ofstream(local_ / "map.json") << R"({"rules": [{"from": "{name}", "to": "{name}"}]})";
    const auto convert = run_reshard({"convert", (local_ / "model.safetensors").string(), (local_ / "ckpt").string(),
                                      "--mesh", "data=1", "--best-effort", "data"});
    ASSERT_EQ(convert.exit_code, 0) << convert.err;
    out_ = storage::Location::parse(fmt::format("s3://{}/{}", testing::s3_server().buckets.at(0),
                                                testing::unique_prefix()));
  }

  testing::CommandResult export_to(const std::string& out, std::vector<std::string> more = {}) const {
    std::vector<std::string> args = {"export", (local_ / "ckpt").string(), out, "--map",
                                     (local_ / "map.json").string()};
    args.insert(args.end(), more.begin(), more.end());
    return run_reshard(args);
  }

  // No byte the command printed holds a secret of the test's credentials.
  static void expect_no_secret(const testing::CommandResult& result, const std::vector<std::string>& secrets) {
    for (const std::string& secret : secrets) {
      EXPECT_THAT(result.out, Not(HasSubstr(secret)));
      EXPECT_THAT(result.err, Not(HasSubstr(secret)));
    }
    EXPECT_THAT(result.err, Not(HasSubstr("Signature=")));
    EXPECT_THAT(result.err, Not(HasSubstr("X-Amz-Security-Token")));
  }

  bool nothing_at(const storage::Location& where) const { return storage::open_store(where)->list(where).empty(); }

  testing::TempFolder local_;
  storage::Location out_;
};

TEST_F(ExportStoreFailures, WrongCredentialsAreRefusedNamingTheirSourceAndNothingIsWritten) {
  const std::string wrong_secret = "wrongSecretKey/abcdefghijklmnopqrstuvwxyz0123";
  const std::string token = "SessionTokenThatMustNeverBePrinted0123456789";
  testing::CommandResult result;
  {
    const ScopedEnv secret("AWS_SECRET_ACCESS_KEY", wrong_secret);
    const ScopedEnv session("AWS_SESSION_TOKEN", token);
    const ScopedEnv debug("RESHARD_LOG", "debug");
    result = export_to(out_.str());
  }
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_THAT(result.err, HasSubstr("error: "));
  EXPECT_THAT(result.err, HasSubstr(out_.bucket()));
  EXPECT_THAT(result.err, HasSubstr("AWS_SECRET_ACCESS_KEY")) << "the message names where the credentials came from";
  EXPECT_THAT(result.err, HasSubstr("-> 403")) << "RESHARD_LOG=debug logs each request";
  expect_no_secret(result, {wrong_secret, token, testing::s3_server().secret_key});
  EXPECT_TRUE(nothing_at(out_));
}

TEST_F(ExportStoreFailures, AMissingBucketIsNamed) {
  const auto result = export_to("s3://reshard-no-such-bucket/model");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("reshard-no-such-bucket"));
  expect_no_secret(result, {testing::s3_server().secret_key});
}

TEST_F(ExportStoreFailures, AnExistingDestinationIsRefusedUnlessForced) {
  ASSERT_EQ(export_to(out_.str()).exit_code, 0);
  const auto store = storage::open_store(out_);
  const std::string before = store->read_all(out_.child("model.safetensors"), 1 << 20);
  const auto again = export_to(out_.str());
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("already exists"));
  EXPECT_THAT(again.err, HasSubstr("--force"));
  EXPECT_EQ(store->read_all(out_.child("model.safetensors"), 1 << 20), before);
  EXPECT_EQ(export_to(out_.str(), {"--force"}).exit_code, 0);
}

TEST_F(ExportStoreFailures, AnEndpointThatDoesNotAnswerFailsWithinTheTimeout) {
  const ScopedEnv endpoint("AWS_ENDPOINT_URL", "http://127.0.0.1:9");  // discard port: nothing listens
  const auto start = std::chrono::steady_clock::now();
  const auto result = export_to(out_.str(), {"--timeout", "2"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_THAT(result.err, HasSubstr("127.0.0.1:9"));
  EXPECT_LT(seconds, 30) << "retries ran far past --timeout";
  expect_no_secret(result, {testing::s3_server().secret_key});
}

}  // namespace
}  // namespace reshard
