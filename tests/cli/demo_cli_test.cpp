// `reshard demo`: the whole run passes, says what it did, keeps its files
// with --out, and fails (exit 1, "error: check failed") when a bit is flipped.
// Under mpirun it runs as tests/cli/mpi registers it.
#include <filesystem>
#include <string>
#include <utility>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/support/run_reshard.h"
#include "support/seed.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using testing::run_reshard;

std::string seed_flag() { return std::to_string(testing::test_seed()); }

TEST(DemoCli, RunsEveryStepAndPasses) {
  const auto result = run_reshard({"demo", "--seed", seed_flag()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("16 devices in 4 processes (threads of this one)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("[7/7] restore the imported checkpoint"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("MB/s"), std::string::npos);
  EXPECT_NE(result.out.find("CPU 15"), std::string::npos) << "no layout picture";
  EXPECT_NE(result.out.find("ok: every tensor of every step equals the reference bit for bit"), std::string::npos);
  EXPECT_EQ(result.err, "");
}

TEST(DemoCli, JsonIsOneDocument) {
  const auto result = run_reshard({"demo", "--json", "--layers", "1", "--lora-modules", "q_proj,v_proj"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto doc = nlohmann::json::parse(result.out);
  EXPECT_EQ(doc["ok"], true);
  EXPECT_EQ(doc["processes"], 4);
  EXPECT_EQ(doc["model"]["lora_modules"], nlohmann::json({"q_proj", "v_proj"}));
  ASSERT_EQ(doc["steps"].size(), 7u);
  EXPECT_EQ(doc["steps"][0]["step"], "build");
  EXPECT_EQ(doc["steps"][4]["step"], "merged");
  EXPECT_EQ(doc["checks"].size(), 4u);
  for (const auto& check : doc["checks"]) EXPECT_EQ(check["mismatches"], 0);
}

TEST(DemoCli, OutKeepsTheFiles) {
  testing::TempFolder folder;
  const auto result = run_reshard({"demo", "--out", (folder / "demo").string(), "--layers", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(fs::exists(folder / "demo/checkpoint/manifest.json"));
  EXPECT_TRUE(fs::exists(folder / "demo/adapter/adapter_model.safetensors"));
  EXPECT_TRUE(fs::exists(folder / "demo/adapter/adapter_config.json"));
  EXPECT_TRUE(fs::exists(folder / "demo/merged/model.safetensors"));
  EXPECT_TRUE(fs::exists(folder / "demo/merged/config.json"));
  EXPECT_TRUE(fs::exists(folder / "demo/imported/manifest.json"));
  // A second run over the same folder replaces what the first left.
  EXPECT_EQ(run_reshard({"demo", "--out", (folder / "demo").string(), "--layers", "1"}).exit_code, 0);
}

TEST(DemoCli, AFlippedBitFailsTheCheck) {
  // The demo's processes are threads here: the error names the one whose check failed.
  const std::pair<const char*, const char*> cases[] = {{"merged", ": check failed: the merged model"},
                                                       {"import", ": check failed: the imported merged model"}};
  for (const auto& [step, message] : cases) {
    const auto result = run_reshard({"demo", "--self-test-flip", step, "--layers", "1"});
    EXPECT_EQ(result.exit_code, 1) << step;
    EXPECT_NE(result.err.find(message), std::string::npos) << result.err;
    EXPECT_EQ(result.err.find("error: rank "), 0u) << result.err;
    EXPECT_EQ(result.out.find("ok: "), std::string::npos) << step;
  }
}

TEST(DemoCli, BadSizesAreUsageErrors) {
  const auto result = run_reshard({"demo", "--embed", "100", "--heads", "8"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--embed 100 is not a multiple of --heads 8"), std::string::npos) << result.err;
  EXPECT_EQ(run_reshard({"demo", "--lora-modules", "q_proj,attn"}).exit_code, 2);
}

}  // namespace
}  // namespace reshard
