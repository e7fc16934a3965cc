// Object-store URLs on the command line: inspect and verify read s3:// and
// gs:// objects (the test servers) as they read local files; convert and
// merge-lora read and write them, each object equal to the file the same
// command writes locally, as does export for its --base; every other scheme
// is a usage error that names the URL and creates nothing (never a local
// folder named "s3:").
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/support/levanter_file.h"
#include "cli/support/run_reshard.h"
#include "pipelines/support/hf_llama_folder.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/storage/open_store.h"
#include "storage/support/object_listing.h"
#include "storage/support/store_servers.h"
#include "support/seed.h"

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

  void upload(const fs::path& folder, const storage::Location& prefix) const {
    for (const auto& [name, bytes] : testing::files_under(folder)) {
      storage::open_store(prefix)->write_all(prefix.child(name), bytes, storage::IfExists::kFail);
    }
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

TEST_P(ObjectStorePaths, ConvertWritesAndReadsObjectsAsItDoesLocalFiles) {
  testing::write_bytes(local_ / "model" / "config.json", R"({"torch_dtype": "float32"})");
  storage::open_store(remote_)->write_all(remote_.child("model/config.json"), R"({"torch_dtype": "float32"})",
                                          storage::IfExists::kFail);
  const auto local = run_reshard({"convert", (local_ / "model").string(), (local_ / "hf").string(), "--dtype", "bf16"});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const auto remote = run_reshard({"convert", remote_.child("model").str(), remote_.child("hf").str(), "--dtype",
                                   "bf16", "--part-size", "5MiB", "--parts-in-flight", "2"});
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_THAT(remote.out, HasSubstr("wrote " + remote_.child("hf").str()));
  EXPECT_EQ(testing::objects_under(remote_.child("hf")), testing::files_under(local_ / "hf"));
  // A lone file, from objects to local and back.
  const auto file = run_reshard({"convert", remote_.child("hf").str(), (local_ / "one.safetensors").string()});
  ASSERT_EQ(file.exit_code, 0) << file.err;
  const auto up = run_reshard({"convert", (local_ / "one.safetensors").string(), remote_.child("one.safetensors").str()});
  ASSERT_EQ(up.exit_code, 0) << up.err;
  EXPECT_EQ(storage::open_store(remote_)->read_all(remote_.child("one.safetensors"), 1 << 20),
            testing::read_bytes(local_ / "one.safetensors"));
  // An existing destination is refused, and nothing is uploaded.
  const auto again = run_reshard({"convert", remote_.child("model").str(), remote_.child("hf").str()});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("already exists"));
  EXPECT_EQ(testing::objects_under(remote_.child("hf")), testing::files_under(local_ / "hf"));
}

TEST_P(ObjectStorePaths, MergeLoraReadsAndWritesObjectsAsItDoesLocalFiles) {
  std::mt19937_64 rng(7);
  const testing::LlamaDims dims;
  testing::TensorBytes bytes;
  const auto model = testing::hf_llama_specs(dims), lora = testing::hf_lora_specs(dims);
  for (const auto& spec : model) bytes[spec.name] = testing::random_values(spec, rng);
  for (const auto& spec : lora) bytes[spec.name] = testing::random_values(spec, rng);
  testing::write_hf_model_folder(local_ / "base", model, bytes, 6000, testing::hf_llama_config_json(dims));
  testing::write_peft_files(local_ / "adapter", lora, bytes, testing::hf_adapter_config_json(dims));
  upload(local_ / "base", remote_.child("base"));
  upload(local_ / "adapter", remote_.child("adapter"));
  const auto local = run_reshard({"merge-lora", (local_ / "base").string(), (local_ / "adapter").string(),
                                  (local_ / "merged").string(), "--max-shard-size", "10000"});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const auto remote = run_reshard({"merge-lora", remote_.child("base").str(), remote_.child("adapter").str(),
                                   remote_.child("merged").str(), "--max-shard-size", "10000", "--part-size", "5MiB"});
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  const auto merged = testing::files_under(local_ / "merged");
  ASSERT_TRUE(merged.contains("model.safetensors.index.json"));
  EXPECT_EQ(testing::objects_under(remote_.child("merged")), merged);
}

TEST_P(ObjectStorePaths, ExportChecksAnAdapterAgainstABaseInAStore) {
  std::mt19937_64 rng = testing::seeded_rng();
  testing::write_levanter_file(local_ / "src.safetensors", rng, true);
  const std::string ckpt = (local_ / "ckpt").string();
  const auto converted = run_reshard({"convert", (local_ / "src.safetensors").string(), ckpt, "--mesh", "x=2",
                                      "--best-effort", "x"});
  ASSERT_EQ(converted.exit_code, 0) << converted.err;
  const auto base = run_reshard({"export", ckpt, (local_ / "base").string(), "--map", "levanter-llama"});
  ASSERT_EQ(base.exit_code, 0) << base.err;
  upload(local_ / "base", remote_.child("base"));
  const auto local = run_reshard({"export", ckpt, (local_ / "adapter").string(), "--map", "levanter-llama",
                                  "--adapter-only", "--base", (local_ / "base").string()});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const auto remote = run_reshard({"export", ckpt, (local_ / "adapter2").string(), "--map", "levanter-llama",
                                   "--adapter-only", "--base", remote_.child("base").str()});
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(testing::files_under(local_ / "adapter2"), testing::files_under(local_ / "adapter"));
  // A base that is not there is named, and nothing is written (no local folder named "s3:" either).
  const fs::path cwd = fs::current_path();
  fs::current_path(local_.path());
  const auto missing = run_reshard({"export", ckpt, "out", "--map", "levanter-llama", "--adapter-only", "--base",
                                    remote_.child("no-base").str()});
  const bool made_a_local_folder = fs::exists(local_.path() / (GetParam() + ":"));
  fs::current_path(cwd);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr(remote_.child("no-base").str()));
  EXPECT_FALSE(made_a_local_folder);
  EXPECT_FALSE(fs::exists(local_ / "out"));
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
