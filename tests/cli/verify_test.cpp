// `reshard verify`: exit 0 and a summary for good files and folders; exit 1
// naming the file (and tensor) for each kind of damage; exit 2 for usage.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/support/run_reshard.h"
#include "reshard/formats/safetensors_writer.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using testing::run_reshard;
using testing::TempFolder;

// `json` behind its 8-byte little-endian length, then `data_bytes` zero bytes.
std::string crafted_file(std::string_view json, size_t data_bytes) {
  std::string out;
  uint64_t length = json.size();
  for (int i = 0; i < 8; ++i, length >>= 8) out.push_back(static_cast<char>(length & 0xFF));
  out += json;
  out.append(data_bytes, '\0');
  return out;
}

void write_two_shards(const fs::path& folder, std::string_view index_json) {
  fs::create_directories(folder);
  const std::vector<std::byte> bytes(8, std::byte{3});
  const safetensors::TensorData first{{"layer.0", DType::kF32, {2}}, bytes};
  const safetensors::TensorData second{{"layer.1", DType::kI64, {1}}, bytes};
  safetensors::write_file(folder / "model-00001-of-00002.safetensors", std::span(&first, 1));
  safetensors::write_file(folder / "model-00002-of-00002.safetensors", std::span(&second, 1));
  testing::write_bytes(folder / "model.safetensors.index.json", index_json);
}

constexpr std::string_view kIndex = R"({"metadata": {"total_size": 16}, "weight_map": {
    "layer.0": "model-00001-of-00002.safetensors", "layer.1": "model-00002-of-00002.safetensors"}})";

void expect_failure_naming(const testing::CommandResult& result, std::vector<std::string> parts) {
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_EQ(result.err.rfind("error: ", 0), 0u) << result.err;
  for (const std::string& part : parts) EXPECT_NE(result.err.find(part), std::string::npos) << part << ": " << result.err;
}

// The id of a process of this host that has ended.
pid_t an_ended_process() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

// A staging folder beside `final_path` as a killed writer of it leaves one.
fs::path killed_writers_staging(const fs::path& final_path) {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) std::snprintf(host.data(), host.size(), "localhost");
  const fs::path staging = final_path.parent_path() / fmt::format(".{}.tmp-reshard-{}-{}.1-0badf00d",
                                                                  final_path.filename().string(), host.data(),
                                                                  an_ended_process());
  fs::create_directories(staging);
  testing::write_bytes(staging / "model-00001-of-00002.safetensors", "partial");
  return staging;
}

// What a killed writer left beside the path is pointed out on stderr (and in
// inspect's JSON), not removed; stdout's contract stays as it was.
TEST(VerifyCommand, AKilledWritersStagingBesideThePathIsPointedOut) {
  TempFolder dir;
  write_two_shards(dir / "model", kIndex);
  const auto clean = run_reshard({"inspect", (dir / "model").string(), "--json"});
  EXPECT_EQ(clean.out.find("unfinished_uploads"), std::string::npos) << clean.out;
  EXPECT_TRUE(clean.err.empty()) << clean.err;

  const fs::path staging = killed_writers_staging(dir / "model");
  const auto verified = run_reshard({"verify", (dir / "model").string()});
  EXPECT_EQ(verified.exit_code, 0) << verified.err;
  EXPECT_EQ(std::count(verified.out.begin(), verified.out.end(), '\n'), 1) << verified.out;
  EXPECT_EQ(verified.err.rfind("note: ", 0), 0u) << verified.err;
  EXPECT_NE(verified.err.find(staging.filename().string()), std::string::npos) << verified.err;
  EXPECT_NE(verified.err.find("the next write of the same destination removes them"), std::string::npos)
      << verified.err;

  const auto inspected = run_reshard({"inspect", (dir / "model").string(), "--json"});
  EXPECT_EQ(inspected.exit_code, 0) << inspected.err;
  const auto json = nlohmann::json::parse(inspected.out);
  ASSERT_TRUE(json.contains("unfinished_uploads")) << inspected.out;
  EXPECT_EQ(json["unfinished_uploads"], nlohmann::json::array({staging.string()}));
  EXPECT_EQ(json["tensors"].size(), 2u);
  EXPECT_TRUE(fs::exists(staging)) << "a reader removed it";
}

TEST(VerifyCommand, GoodFileAndFolderPassWithOneLine) {
  TempFolder dir;
  write_two_shards(dir / "model", kIndex);
  const auto folder = run_reshard({"verify", (dir / "model").string()});
  EXPECT_EQ(folder.exit_code, 0) << folder.err;
  EXPECT_EQ(std::count(folder.out.begin(), folder.out.end(), '\n'), 1) << folder.out;
  EXPECT_NE(folder.out.find("2 files, 2 tensors"), std::string::npos) << folder.out;
  EXPECT_TRUE(folder.err.empty()) << folder.err;

  const auto file = run_reshard({"verify", (dir / "model" / "model-00001-of-00002.safetensors").string()});
  EXPECT_EQ(file.exit_code, 0) << file.err;
  EXPECT_NE(file.out.find("1 file, 1 tensors"), std::string::npos) << file.out;
}

// The reference keeps the last entry of a repeated name; verify accepts the
// file as the reference does and says that the header repeats the name.
TEST(VerifyCommand, ARepeatedNameIsAcceptedWithAWarning) {
  TempFolder dir;
  testing::write_bytes(dir / "r.safetensors",
                       crafted_file(R"({"t":{"dtype":"U8","shape":[9],"data_offsets":[0,9]},)"
                                    R"("t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
                                    2));
  const auto result = run_reshard({"verify", (dir / "r.safetensors").string()});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("repeats tensor 't'"), std::string::npos) << result.err;
  EXPECT_NE(result.out.find("1 tensors"), std::string::npos) << result.out;
}

TEST(VerifyCommand, TensorSizeNotMatchingItsOffsetsNamesFileAndTensor) {
  TempFolder dir;
  testing::write_bytes(dir / "bad.safetensors",
                       crafted_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,8]}})",
                                    8));
  expect_failure_naming(run_reshard({"verify", (dir / "bad.safetensors").string()}), {"bad.safetensors", "b"});
}

TEST(VerifyCommand, GapBetweenTensorsNamesFileAndTensor) {
  TempFolder dir;
  testing::write_bytes(dir / "gap.safetensors",
                       crafted_file(R"({"first":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                    R"("second":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})",
                                    10));
  expect_failure_naming(run_reshard({"verify", (dir / "gap.safetensors").string()}), {"gap.safetensors", "second"});
}

TEST(VerifyCommand, TruncatedShardNamesTheFile) {
  TempFolder dir;
  write_two_shards(dir / "model", kIndex);
  const fs::path shard = dir / "model" / "model-00002-of-00002.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 3);
  expect_failure_naming(run_reshard({"verify", (dir / "model").string()}), {"model-00002-of-00002.safetensors"});
}

TEST(VerifyCommand, IndexListingAMissingTensorNamesFileAndTensor) {
  TempFolder dir;
  write_two_shards(dir / "model", R"({"weight_map": {"layer.0": "model-00001-of-00002.safetensors",
      "layer.1": "model-00002-of-00002.safetensors", "layer.2": "model-00002-of-00002.safetensors"}})");
  expect_failure_naming(run_reshard({"verify", (dir / "model").string()}),
                        {"model-00002-of-00002.safetensors", "layer.2"});
}

TEST(VerifyCommand, ShardTensorMissingFromTheIndexNamesFileAndTensor) {
  TempFolder dir;
  write_two_shards(dir / "model", kIndex);
  const std::vector<std::byte> eight(8), two(2);
  const safetensors::TensorData tensors[] = {{{"layer.1", DType::kI64, {1}}, eight},
                                             {{"stray", DType::kU8, {2}}, two}};
  safetensors::write_file(dir / "model" / "model-00002-of-00002.safetensors", tensors);
  expect_failure_naming(run_reshard({"verify", (dir / "model").string()}),
                        {"model-00002-of-00002.safetensors", "stray", "not listed"});
}

TEST(VerifyCommand, WrongTotalSizeOnlyWarns) {
  TempFolder dir;
  write_two_shards(dir / "model", R"({"metadata": {"total_size": 99}, "weight_map": {
      "layer.0": "model-00001-of-00002.safetensors", "layer.1": "model-00002-of-00002.safetensors"}})");
  const auto result = run_reshard({"verify", (dir / "model").string()});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("warning: "), std::string::npos);
  EXPECT_NE(result.err.find("99"), std::string::npos) << result.err;
}

TEST(VerifyCommand, UsageErrorsExitTwo) {
  EXPECT_EQ(run_reshard({"verify"}).exit_code, 2);
  EXPECT_EQ(run_reshard({"verify", "a", "b"}).exit_code, 2);
  EXPECT_EQ(run_reshard({"verify", "--bogus", "a"}).exit_code, 2);
}

}  // namespace
}  // namespace reshard
