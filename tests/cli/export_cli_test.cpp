// `reshard export`: the folders it writes from a checkpoint made by `reshard
// convert`, its exit codes and `error:` messages, and that a refused or failed
// export leaves nothing at OUT.
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/support/levanter_file.h"
#include "cli/support/run_reshard.h"
#include "reshard/formats/hf_folder.h"
#include "support/seed.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using testing::run_reshard;
using testing::TempFolder;

class ExportCli : public ::testing::Test {
 protected:
  void make_checkpoint(bool with_configs) {
    std::mt19937_64 rng = testing::seeded_rng();
    bytes_ = testing::write_levanter_file(dir_ / "src.safetensors", rng, with_configs);
    const auto result = run_reshard({"convert", (dir_ / "src.safetensors").string(), ckpt(), "--mesh", "data=2,model=2",
                                     "--devices", "0,2,1,3", "--best-effort", "model"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }
  std::string ckpt() const { return (dir_ / "ckpt").string(); }
  std::string out() const { return (dir_ / "out").string(); }

  TempFolder dir_;
  std::map<std::string, std::vector<std::byte>> bytes_;
};

// The bytes of one tensor of a written folder.
std::vector<std::byte> tensor_bytes(const fs::path& folder, const std::string& name) {
  const HfFolder hf = HfFolder::open(folder);
  const TensorCatalog::Entry* entry = hf.catalog.find(name);
  if (entry == nullptr) return {};
  std::vector<std::byte> out(static_cast<size_t>(entry->info->byte_size()));
  hf.catalog.file_of(*entry).read(*entry->info, out);
  return out;
}

TEST_F(ExportCli, WritesAHuggingFaceFolderWithConfigAndUnstackedLayers) {
  make_checkpoint(true);
  const auto result = run_reshard({"export", ckpt(), out(), "--map", "levanter-llama", "--max-shard-size", "10KB"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("wrote " + out() + ": Hugging Face folder"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("exporting"), std::string::npos) << result.err;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "model.safetensors.index.json"));
  EXPECT_EQ(nlohmann::json::parse(testing::read_bytes(dir_ / "out" / "config.json"))["hidden_size"], 16);
  // The preset keeps every axis in order, so layer 1 of q is the stacked tensor's second half.
  const std::vector<std::byte>& q = bytes_.at("transformer.layers.stacked.self_attn.q_proj.weight");
  const std::vector<std::byte> layer1(q.begin() + static_cast<std::ptrdiff_t>(q.size() / 2), q.end());
  EXPECT_EQ(tensor_bytes(dir_ / "out", "model.layers.1.self_attn.q_proj.weight"), layer1);
  EXPECT_TRUE(tensor_bytes(dir_ / "out", "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight").empty());
}

TEST_F(ExportCli, AdapterOnlyAndMergedFolders) {
  make_checkpoint(true);
  auto result = run_reshard({"export", ckpt(), out(), "--map", "levanter-llama", "--adapter-only"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("PEFT adapter folder"), std::string::npos) << result.out;
  const auto config = nlohmann::json::parse(testing::read_bytes(dir_ / "out" / "adapter_config.json"));
  EXPECT_EQ(config["target_modules"], nlohmann::json::parse(R"(["q_proj", "v_proj"])"));
  EXPECT_EQ(config["r"], 4);
  result = run_reshard({"export", ckpt(), (dir_ / "merged").string(), "--map", "levanter-llama", "--merge-lora",
                        "--dtype", "bf16"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("4 merged"), std::string::npos) << result.out;
  EXPECT_EQ(nlohmann::json::parse(testing::read_bytes(dir_ / "merged" / "config.json"))["torch_dtype"], "bfloat16");
}

// A LoRA run's checkpoint holds the factors alone: --merge-lora --base merges
// them into a Hugging Face folder's weights, as a checkpoint that holds both
// is merged.
TEST_F(ExportCli, MergesAFactorsOnlyCheckpointIntoABaseFolder) {
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  testing::write_levanter_file(dir_ / "full.safetensors", rng, true);
  rng.seed(seed);
  testing::write_levanter_file(dir_ / "factors.safetensors", rng, true, true);
  for (const std::string name : {"full", "factors"}) {
    const auto result = run_reshard({"convert", (dir_ / (name + ".safetensors")).string(), (dir_ / name).string(),
                                     "--mesh", "data=2,model=2", "--best-effort", "model"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }
  const std::string full = (dir_ / "full").string(), base = (dir_ / "base").string();
  ASSERT_EQ(run_reshard({"export", full, base, "--map", "levanter-llama"}).exit_code, 0);
  ASSERT_EQ(run_reshard({"export", full, (dir_ / "expected").string(), "--map", "levanter-llama", "--merge-lora"}).exit_code,
            0);
  auto result = run_reshard({"export", (dir_ / "factors").string(), out(), "--map", "levanter-llama", "--merge-lora",
                             "--base", base});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("4 merged"), std::string::npos) << result.out;
  for (const auto& entry : fs::directory_iterator(dir_ / "expected")) {
    EXPECT_EQ(testing::read_bytes(dir_ / "out" / entry.path().filename()), testing::read_bytes(entry.path()))
        << entry.path().filename();
  }
  // A checkpoint that holds base weights itself merges into them: a base beside it is refused.
  result = run_reshard({"export", full, (dir_ / "refused").string(), "--map", "levanter-llama", "--merge-lora",
                        "--base", base});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("holds base weights itself"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(dir_ / "refused"));
}

TEST_F(ExportCli, ErrorsNameWhatIsAtFaultAndWriteNothing) {
  make_checkpoint(false);
  auto result = run_reshard({"export", ckpt(), out(), "--map", "levanter-llama", "--merge-lora"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("\nerror: "), std::string::npos) << result.err;  // after the line saying what it does
  EXPECT_NE(result.err.find("no LoRA config"), std::string::npos) << result.err;
  testing::write_bytes(dir_ / "map.json", R"({"rules": [{"from": "embeddings.token_embeddings.weight", "to": "e"}]})");
  result = run_reshard({"export", ckpt(), out(), "--map", (dir_ / "map.json").string()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("layers.stacked.input_layernorm.weight' (F32 2x16): no rule of the map matches it"),
            std::string::npos) << result.err;
  result = run_reshard({"export", ckpt(), out(), "--map", (dir_ / "missing.json").string()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("missing.json"), std::string::npos) << result.err;
  result = run_reshard({"export", ckpt(), out(), "--map", "levanter-llama", "--gather-to", "3"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("gather to process 3"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  fs::create_directories(dir_ / "out");
  testing::write_bytes(dir_ / "out" / "notes.txt", "mine");
  result = run_reshard({"export", ckpt(), out(), "--map", "levanter-llama"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("--force"), std::string::npos) << result.err;
  result = run_reshard({"export", ckpt(), out(), "--map", "levanter-llama", "--force"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(testing::read_bytes(dir_ / "out" / "notes.txt"), "mine");
}

// A map file that is not a map is bad input (exit 1), named, with nothing written.
TEST_F(ExportCli, AMalformedMapFileExitsOne) {
  make_checkpoint(true);
  testing::write_bytes(dir_ / "map.json", R"({"rules": [{"from": "a", "to": "b", "rearrange": "x x -> x"}]})");
  const auto result = run_reshard({"export", ckpt(), out(), "--map", (dir_ / "map.json").string()});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_TRUE(result.err.starts_with("error: ")) << result.err;
  EXPECT_NE(result.err.find("map.json"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(ExportCli, UsageErrorsExitWithTwo) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"export", "c", "o", "--map", "levanter-llama", "--adapter-only", "--merge-lora"},
           {"export", "c", "o", "--map", "levanter-llama", "--base", "b"},
           {"export", "c", "o", "--map", "levanter-llama", "--adapter-only", "--max-shard-size", "1GB"},
           {"export", "c", "o", "--map", "levanter-llama", "--dtype", "i32"},
           {"export", "c", "o"}}) {
    const auto result = run_reshard(args);
    EXPECT_EQ(result.exit_code, 2) << fmt::format("{}", fmt::join(args, " ")) << ": " << result.err;
    EXPECT_TRUE(result.err.starts_with("error: ")) << result.err;
  }
  const auto help = run_reshard({"export", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("reshard export ckpt/ my-adapter/ --map levanter-llama --adapter-only"), std::string::npos);
}

}  // namespace
}  // namespace reshard
