// open_store: one client per scheme, options and environment. A process that
// points AWS_ENDPOINT_URL (or STORAGE_EMULATOR_HOST) elsewhere, as a test that
// starts its own server does, gets a client for the new place, never the one
// made for the old.
#include "reshard/storage/open_store.h"

#include <chrono>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "storage/support/aws_environment.h"

namespace reshard {
namespace {

using storage::Location;
using storage::open_store;

TEST(OpenStore, AClientIsSharedUntilTheEnvironmentPointsElsewhere) {
  const testing::ScopedAwsEnvironment environment;
  testing::ScopedAwsEnvironment::set("AWS_REGION", "us-east-1");
  testing::ScopedAwsEnvironment::set("AWS_ENDPOINT_URL", "http://127.0.0.1:1");
  const Location where = Location::parse("s3://bucket/key");
  const auto first = open_store(where);
  EXPECT_EQ(open_store(where), first) << "the same place and options share one client";
  testing::ScopedAwsEnvironment::set("AWS_ENDPOINT_URL", "http://127.0.0.1:2");
  const auto second = open_store(where);
  EXPECT_NE(second, first) << "a client made for the old endpoint was reused";
  testing::ScopedAwsEnvironment::set("AWS_ENDPOINT_URL", "http://127.0.0.1:1");
  EXPECT_EQ(open_store(where), first);
  storage::StoreOptions options = storage::default_store_options();
  options.timeout = std::chrono::seconds(7);
  EXPECT_NE(open_store(where, options), first) << "other options, another client";
}

TEST(OpenStore, AGcsClientFollowsTheEmulatorHost) {
  const char* saved = std::getenv("STORAGE_EMULATOR_HOST");
  const std::string restore = saved == nullptr ? "" : saved;
  ::setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:1", 1);
  const Location where = Location::parse("gs://bucket/key");
  const auto first = open_store(where);
  ::setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:2", 1);
  EXPECT_NE(open_store(where), first);
  if (saved == nullptr) {
    ::unsetenv("STORAGE_EMULATOR_HOST");
  } else {
    ::setenv("STORAGE_EMULATOR_HOST", restore.c_str(), 1);
  }
}

}  // namespace
}  // namespace reshard
