// `reshard convert` to and from checkpoints, and `inspect` / `verify` on them:
// byte-identical round trips through any layout, damage named by tensor and
// chunk, usage errors, and a full disk that leaves the old checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/support/run_reshard.h"
#include "reshard/formats/safetensors_writer.h"
#include "support/seed.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using testing::run_reshard;
using testing::TempFolder;

// A model file as transformers writes it: "format": "pt", floats, ints, a scalar.
void write_model(const fs::path& path, std::mt19937_64& rng) {
  const std::vector<safetensors::TensorSpec> specs = {{"model.embed.weight", DType::kF32, {8, 6}},
                                                      {"model.layers.0.q.weight", DType::kBF16, {4, 8}},
                                                      {"model.layers.0.ids", DType::kI32, {8}},
                                                      {"model.scale", DType::kF32, {}},
                                                      {"model.empty", DType::kF16, {0, 4}}};
  std::vector<std::vector<std::byte>> bytes;
  std::vector<safetensors::TensorData> data;
  for (const auto& spec : specs) {
    uint64_t n = 1;
    for (uint64_t d : spec.shape) n *= d;
    std::vector<std::byte> b(static_cast<size_t>(n) * element_bytes(spec.dtype));
    for (std::byte& x : b) x = static_cast<std::byte>(rng() & 0xFF);
    bytes.push_back(std::move(b));
  }
  for (size_t i = 0; i < specs.size(); ++i) data.push_back({specs[i], bytes[i]});
  safetensors::write_file(path, data);
}

void expect_ok(const testing::CommandResult& result) {
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
}

TEST(ConvertCheckpoint, FileToCheckpointToAnyLayoutAndBackIsByteIdentical) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  write_model(dir / "src.safetensors", rng);
  testing::write_bytes(dir / "rules.txt",
                       "# pattern  spec\n*.embed.weight  a,b\n*.q.weight P(None, ('a','b'))\n*.ids  b\n");
  expect_ok(run_reshard({"convert", (dir / "src.safetensors").string(), (dir / "ck").string(), "--mesh", "a=2,b=2",
                         "--rules", (dir / "rules.txt").string()}));
  expect_ok(run_reshard({"verify", (dir / "ck").string()}));
  expect_ok(run_reshard({"convert", (dir / "ck").string(), (dir / "back.safetensors").string()}));
  EXPECT_EQ(testing::read_bytes(dir / "back.safetensors"), testing::read_bytes(dir / "src.safetensors"));
  // Resume on another cluster: a new mesh, a new device order.
  expect_ok(run_reshard({"convert", (dir / "ck").string(), (dir / "ck8").string(), "--mesh", "m=8", "--devices",
                         "7,6,5,4,3,2,1,0", "--best-effort", "m"}));
  expect_ok(run_reshard({"convert", (dir / "ck8").string(), (dir / "back8.safetensors").string()}));
  EXPECT_EQ(testing::read_bytes(dir / "back8.safetensors"), testing::read_bytes(dir / "src.safetensors"));
  // To a Hugging Face folder and back in.
  expect_ok(run_reshard({"convert", (dir / "ck8").string(), (dir / "hf").string(), "--max-shard-size", "200"}));
  expect_ok(run_reshard({"verify", (dir / "hf").string()}));
  expect_ok(run_reshard({"convert", (dir / "hf").string(), (dir / "back-hf.safetensors").string()}));
  EXPECT_EQ(testing::read_bytes(dir / "back-hf.safetensors"), testing::read_bytes(dir / "src.safetensors"));
}

TEST(ConvertCheckpoint, InspectShowsChunksAndTheSavedLayout) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  write_model(dir / "src.safetensors", rng);
  expect_ok(run_reshard({"convert", (dir / "src.safetensors").string(), (dir / "ck").string(), "--mesh", "x=2",
                         "--best-effort", "x"}));
  const auto result = run_reshard({"inspect", (dir / "ck").string(), "--json", "--hash"});
  expect_ok(result);
  const auto json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["format"], "checkpoint");
  EXPECT_EQ(json["metadata"]["format"], "pt");
  ASSERT_EQ(json["tensors"].size(), 5u);
  EXPECT_EQ(json["tensors"][0]["name"], "model.embed.weight");  // sorted by name
  const auto& embed = json["tensors"][0];
  EXPECT_EQ(embed["chunks"].size(), 2u);
  EXPECT_NE(embed["layout"].get<std::string>().find("PartitionSpec(None, 'x')"), std::string::npos) << embed["layout"];
  EXPECT_EQ(embed["sha256"].get<std::string>().size(), 64u);
  // The same hash as the file the tensor came from.
  const auto source = nlohmann::json::parse(run_reshard({"inspect", (dir / "src.safetensors").string(), "--json", "--hash"}).out);
  EXPECT_EQ(source["tensors"][0]["sha256"], embed["sha256"]);
  const auto text = run_reshard({"inspect", (dir / "ck").string()});
  expect_ok(text);
  EXPECT_NE(text.out.find("chunk 1"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("format checkpoint"), std::string::npos) << text.out;
}

TEST(ConvertCheckpoint, VerifyNamesTheTensorAndChunkOfDamage) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  write_model(dir / "src.safetensors", rng);
  expect_ok(run_reshard({"convert", (dir / "src.safetensors").string(), (dir / "ck").string(), "--mesh", "x=2",
                         "--best-effort", "x"}));
  const auto manifest = nlohmann::json::parse(testing::read_bytes(dir / "ck" / "manifest.json"));
  const auto& chunk = manifest["manifest"]["tensors"][0]["chunks"][1];
  const fs::path file = dir / "ck" / chunk["file"].get<std::string>();
  std::string bytes = testing::read_bytes(file);
  const std::string good = bytes;
  bytes[chunk["offset"].get<size_t>() + 3] ^= 0x10;
  testing::write_bytes(file, bytes);
  const auto result = run_reshard({"verify", (dir / "ck").string()});
  EXPECT_EQ(result.exit_code, 1);
  for (const std::string& part : std::vector<std::string>{"model.embed.weight", "chunk 1", "checksum mismatch", chunk["file"].get<std::string>()}) {
    EXPECT_NE(result.err.find(part), std::string::npos) << part << ": " << result.err;
  }
  const auto convert = run_reshard({"convert", (dir / "ck").string(), (dir / "out.safetensors").string()});
  EXPECT_EQ(convert.exit_code, 1);
  EXPECT_NE(convert.err.find("chunk 1"), std::string::npos) << convert.err;
  EXPECT_FALSE(fs::exists(dir / "out.safetensors"));
  testing::write_bytes(file, good);
  fs::remove(file);
  const auto missing = run_reshard({"verify", (dir / "ck").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("missing"), std::string::npos) << missing.err;
}

// A rules file that does not parse is bad input (exit 1), not a usage error.
TEST(ConvertCheckpoint, AMalformedRulesFileExitsOne) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  write_model(dir / "src.safetensors", rng);
  testing::write_bytes(dir / "rules.txt", "*.weight\n");
  const auto result = run_reshard({"convert", (dir / "src.safetensors").string(), (dir / "ck").string(), "--mesh",
                                   "x=2", "--rules", (dir / "rules.txt").string()});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("rules.txt: line 1"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(dir / "ck"));
}

TEST(ConvertCheckpoint, UsageErrorsExitTwo) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  write_model(dir / "src.safetensors", rng);
  const std::string src = (dir / "src.safetensors").string(), ck = (dir / "ck").string();
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"convert", src, ck, "--mesh", "x=2"},
           {"convert", src, ck, "--mesh", "x=2", "--best-effort", "x", "--rules", "r.txt"},
           {"convert", src, ck, "--mesh", "x=2", "--best-effort", "y"},
           {"convert", src, ck, "--best-effort", "x"},
           {"convert", src, ck, "--mesh", "x=2", "--best-effort", "x", "--max-shard-size", "1GB"}}) {
    const auto result = run_reshard(args);
    EXPECT_EQ(result.exit_code, 2) << fmt::format("{}", fmt::join(args, " ")) << ": " << result.err;
    EXPECT_FALSE(fs::exists(ck));
  }
}

TEST(ConvertCheckpoint, AFullDiskFailsAndLeavesTheOldCheckpoint) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  write_model(dir / "src.safetensors", rng);
  const std::string src = (dir / "src.safetensors").string(), ck = (dir / "ck").string();
  expect_ok(run_reshard({"convert", src, ck, "--mesh", "x=2", "--best-effort", "x"}));
  const std::string manifest = testing::read_bytes(dir / "ck" / "manifest.json");
  const auto result = run_reshard({"convert", src, ck, "--mesh", "x=1", "--best-effort", "x", "--force"},
                                  {.max_file_bytes = 400});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("data-00000.safetensors"), std::string::npos) << result.err;
  EXPECT_EQ(testing::read_bytes(dir / "ck" / "manifest.json"), manifest);
  expect_ok(run_reshard({"verify", ck}));
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "ck" || name == "src.safetensors") << name;
  }
}

}  // namespace
}  // namespace reshard
