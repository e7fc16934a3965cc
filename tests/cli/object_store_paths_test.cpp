// Object-store URLs on the command line: inspect and verify read s3:// and
// gs:// objects (the test servers) as they read local files; every other
// scheme, and URLs where a command takes local paths only, are usage errors
// that name the URL and create nothing (never a local folder named "s3:").
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/support/run_reshard.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/storage/open_store.h"
#include "storage/support/store_servers.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::run_reshard;
using testing::TempFolder;

class ObjectStorePaths : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    testing::point_environment_at_servers();
    const bool s3 = GetParam() == "s3";
    const std::string bucket = s3 ? testing::s3_server().buckets.at(0) : testing::gcs_server().buckets.at(0);
    remote_ = storage::Location::parse(fmt::format("{}://{}/{}", s3 ? "s3" : "gs", bucket, testing::unique_prefix()));
    const std::vector<std::byte> w(64 * 4, std::byte{3});
    const std::vector<std::byte> b(8 * 2, std::byte{5});
    const safetensors::TensorData tensors[] = {{{"w", DType::kF32, {8, 8}}, w}, {{"b", DType::kBF16, {8}}, b}};
    fs::create_directories(local_ / "model");
    safetensors::write_file(local_ / "model" / "model.safetensors", tensors);
    const std::shared_ptr<storage::Store> store = storage::open_store(remote_);
    store->write_all(remote_.child("model/model.safetensors"), testing::read_bytes(local_ / "model" / "model.safetensors"),
                     storage::IfExists::kFail);
  }

  TempFolder local_;
  storage::Location remote_;
};

TEST_P(ObjectStorePaths, InspectReadsAnObjectFolderAsItReadsTheLocalOne) {
  const auto local = run_reshard({"inspect", "--json", "--hash", (local_ / "model").string()});
  const auto remote = run_reshard({"inspect", "--json", "--hash", remote_.child("model").str()});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  // Format, metadata, every tensor and each one's sha256 of its bytes.
  EXPECT_EQ(nlohmann::json::parse(remote.out), nlohmann::json::parse(local.out));
  const auto text = run_reshard({"inspect", remote_.child("model").str()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr(remote_.child("model").str()));
}

TEST_P(ObjectStorePaths, VerifyReadsEveryByteOfAnObject) {
  const auto result = run_reshard({"verify", remote_.child("model/model.safetensors").str()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("ok: " + remote_.child("model/model.safetensors").str()));
}

TEST_P(ObjectStorePaths, AMissingObjectIsAFailureNamingIt) {
  const auto result = run_reshard({"inspect", remote_.child("absent").str()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(remote_.child("absent").str()));
}

TEST_P(ObjectStorePaths, CommandsThatWriteLocallyRefuseAUrlAndCreateNothing) {
  const fs::path cwd = fs::current_path();
  fs::current_path(local_.path());
  const auto result = run_reshard({"convert", "model/model.safetensors", remote_.child("out").str()});
  const bool made_a_local_folder = fs::exists(local_.path() / (GetParam() + ":"));
  fs::current_path(cwd);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr(remote_.child("out").str()));
  EXPECT_THAT(result.err, HasSubstr("local files only"));
  EXPECT_FALSE(made_a_local_folder);
  EXPECT_TRUE(storage::open_store(remote_)->list(remote_.child("out")).empty());
}

INSTANTIATE_TEST_SUITE_P(Stores, ObjectStorePaths, ::testing::Values("s3", "gs"),
                         [](const auto& param_info) { return param_info.param; });

TEST(UnknownSchemes, AreUsageErrorsNamingTheScheme) {
  for (const std::string url : {"hf://meta-llama/Llama-3-8B", "http://example.com/m.safetensors", "s3:bucket/key"}) {
    const auto result = run_reshard({"inspect", url});
    EXPECT_EQ(result.exit_code, 2) << url;
    EXPECT_THAT(result.err, HasSubstr(url)) << url;
  }
  const auto result = run_reshard({"export", "ckpt", "hf://org/model", "--map", "levanter-llama"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("hf://"));
}

}  // namespace
}  // namespace reshard
