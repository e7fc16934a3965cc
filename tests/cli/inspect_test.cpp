// `reshard inspect`: its JSON contract, sha256 against the
// reference files' independently computed digests, the text table, errors.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/support/run_reshard.h"
#include "reshard/formats/safetensors_writer.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using testing::run_reshard;
using testing::TempFolder;

const fs::path kGolden = fs::path(RESHARD_SHARED_DIR) / "golden" / "safetensors";

nlohmann::json golden_expected() {
  std::ifstream in(kGolden / "expected.json");
  return nlohmann::json::parse(in);
}

std::vector<std::string> keys_of(const ordered_json& object) {
  std::vector<std::string> keys;
  for (const auto& item : object.items()) keys.push_back(item.key());
  return keys;
}

// A folder of two shards written by hand: b and a in the first, c in the second.
void write_sharded_folder(const fs::path& folder) {
  fs::create_directories(folder);
  const std::vector<std::byte> four(4, std::byte{7});
  const std::vector<std::byte> eight(8, std::byte{9});
  const safetensors::TensorData first[] = {{{"b", DType::kF32, {1}}, four}, {{"a", DType::kI32, {2}}, eight}};
  const safetensors::TensorData second[] = {{{"c", DType::kU8, {4}}, four}};
  safetensors::write_file(folder / "model-00001-of-00002.safetensors", first);
  safetensors::write_file(folder / "model-00002-of-00002.safetensors", second);
  testing::write_bytes(folder / "model.safetensors.index.json",
                       R"({"metadata": {"total_size": 16}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                           "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})");
}

TEST(InspectCommand, JsonMatchesTheReferenceFilesWithIndependentHashes) {
  const nlohmann::json expected = golden_expected();
  for (const auto& [file_name, file] : expected["files"].items()) {
    const auto result = run_reshard({"inspect", (kGolden / file_name).string(), "--json", "--hash"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const ordered_json out = ordered_json::parse(result.out);  // stdout holds the JSON and nothing else
    EXPECT_EQ(keys_of(out), (std::vector<std::string>{"format", "metadata", "tensors"}));
    EXPECT_EQ(out["format"], "safetensors");
    EXPECT_EQ(nlohmann::json(out["metadata"]), file["metadata"]) << file_name;
    const auto& tensors = out["tensors"];
    ASSERT_EQ(tensors.size(), file["tensors"].size()) << file_name;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& want = file["tensors"][i];  // expected.json lists tensors by name too
      EXPECT_EQ(keys_of(tensors[i]), (std::vector<std::string>{"name", "dtype", "shape", "bytes", "file", "sha256"}));
      EXPECT_EQ(tensors[i]["name"], want["name"]);
      EXPECT_EQ(tensors[i]["dtype"], want["dtype"]);
      EXPECT_EQ(nlohmann::json(tensors[i]["shape"]), want["shape"]);
      EXPECT_EQ(tensors[i]["bytes"], want["data_offsets"][1].get<uint64_t>() - want["data_offsets"][0].get<uint64_t>());
      EXPECT_EQ(tensors[i]["file"], file_name);
      EXPECT_EQ(tensors[i]["sha256"], want["sha256"]) << want["name"];
    }
  }
}

TEST(InspectCommand, FolderJsonIsSortedByNameWithFilesAndNoHashUnlessAsked) {
  TempFolder dir;
  write_sharded_folder(dir / "model");
  const auto result = run_reshard({"inspect", (dir / "model").string(), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const ordered_json out = ordered_json::parse(result.out);
  EXPECT_EQ(out["format"], "hf");
  EXPECT_EQ(out["metadata"], (ordered_json{{"format", "pt"}}));
  std::vector<std::string> names, files;
  for (const auto& tensor : out["tensors"]) {
    names.push_back(tensor["name"]);
    files.push_back(tensor["file"]);
    EXPECT_FALSE(tensor.contains("sha256"));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(files, (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00001-of-00002.safetensors",
                                             "model-00002-of-00002.safetensors"}));
  EXPECT_EQ(out["tensors"][0]["dtype"], "I32");
  EXPECT_EQ(out["tensors"][0]["shape"], ordered_json::array({2}));
  EXPECT_EQ(out["tensors"][0]["bytes"], 8);
}

TEST(InspectCommand, PeftAdapterFolder) {
  TempFolder dir;
  const std::vector<std::byte> bytes(16);
  const safetensors::TensorData tensor{{"base_model.model.q_proj.lora_A.weight", DType::kF32, {2, 2}}, bytes};
  safetensors::write_file(dir / "adapter_model.safetensors", std::span(&tensor, 1));
  testing::write_bytes(dir / "adapter_config.json", R"({"peft_type": "LORA"})");
  const auto result = run_reshard({"inspect", dir.path().string(), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const ordered_json out = ordered_json::parse(result.out);
  EXPECT_EQ(out["format"], "peft");
  EXPECT_EQ(out["tensors"][0]["file"], "adapter_model.safetensors");
}

TEST(InspectCommand, TextTableWithTotals) {
  TempFolder dir;
  write_sharded_folder(dir / "model");
  const auto result = run_reshard({"inspect", (dir / "model").string(), "--hash"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* part : {"NAME", "SHA256", "model-00002-of-00002.safetensors", "[2]",
                           "3 tensors, 7 parameters, 16 bytes", "2 files", "format hf"}) {
    EXPECT_NE(result.out.find(part), std::string::npos) << part << " in\n" << result.out;
  }
}

TEST(InspectCommand, Errors) {
  TempFolder dir;
  const auto usage = run_reshard({"inspect"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_EQ(usage.err.rfind("error: ", 0), 0u) << usage.err;

  const auto missing = run_reshard({"inspect", (dir / "nope.safetensors").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("error: "), std::string::npos);
  EXPECT_NE(missing.err.find("nope.safetensors"), std::string::npos) << missing.err;
  EXPECT_TRUE(missing.out.empty());

  const auto unknown = run_reshard({"inspect", dir.path().string()});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("not supported yet"), std::string::npos) << unknown.err;
}

}  // namespace
}  // namespace reshard
