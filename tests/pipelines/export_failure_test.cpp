// An export that cannot be done fails before writing (map errors name the
// tensor and rule), and one that fails part-way on one process fails on
// every process and leaves the output as it was.
#include <atomic>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "execute/support/rank_threads.h"
#include "layout/support/expect_error.h"
#include "pipelines/support/export_files.h"
#include "reshard/pipelines/export_model.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;

class ExportFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng = testing::seeded_rng();
    model_ = testing::levanter_model(testing::LevanterDims{}, DType::kF32, rng);
    testing::save_levanter_checkpoint(model_, dir_ / "ckpt", std::nullopt);
  }

  void run_export(int ranks, const TensorMap& map, const ExportOptions& options) {
    testing::run_ranks(ranks, [&](Transport& transport) { export_checkpoint(dir_ / "ckpt", dir_ / "out", map, transport, options); });
  }

  // The preset with rule `index` changed by `edit`.
  static TensorMap edited_preset(const std::function<void(nlohmann::json& rules)>& edit) {
    nlohmann::json json = nlohmann::json::parse(tensor_map_json(*tensor_map_preset("levanter-llama")));
    edit(json["rules"]);
    return parse_tensor_map(json.dump(), "map.json");
  }

  // Nothing but the checkpoint in the scratch folder: no output, no staging left.
  void expect_nothing_written() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_.path())) names.push_back(entry.path().filename().string());
    EXPECT_EQ(names, std::vector<std::string>{"ckpt"});
  }

  std::vector<testing::FrameworkTensor> model_;
  testing::TempDir dir_;
};

TEST_F(ExportFailureTest, MapErrorsNameTensorAndRuleBeforeWriting) {
  const TensorMap missing = edited_preset([](nlohmann::json& rules) {
    rules.push_back({{"from", "transformer.layers.stacked.mlp.bias"}, {"to", "model.mlp.bias"}});
  });
  EXPECT_TRUE(testing::throws_error([&] { run_export(2, missing, {}); }, ErrorCode::kMissingTensor,
                                    {"transformer.layers.stacked.mlp.bias"}));
  const TensorMap indivisible = edited_preset([](nlohmann::json& rules) {
    rules[10]["rearrange"] = "(a b) -> a b";
    rules[10]["sizes"] = {{"a", 3}};
  });
  EXPECT_TRUE(testing::throws_error([&] { run_export(2, indivisible, {}); }, ErrorCode::kIndivisible,
                                    {"transformer.norm.weight", "rule 10"}));
  const TensorMap duplicate = edited_preset([](nlohmann::json& rules) { rules[11]["to"] = "model.embed_tokens.weight"; });
  EXPECT_TRUE(testing::throws_error([&] { run_export(2, duplicate, {}); }, ErrorCode::kDuplicateTensor,
                                    {"model.embed_tokens.weight"}));
  ExportOptions merge;
  merge.kind = ExportKind::kMergedModel;
  EXPECT_TRUE(testing::throws_error([&] { run_export(2, *tensor_map_preset("levanter-llama"), merge); },
                                    kNoLoraConfig, {"no LoRA config"}));
  ExportOptions gather;
  gather.gather_to = 2;
  EXPECT_TRUE(testing::throws_error([&] { run_export(2, *tensor_map_preset("levanter-llama"), gather); },
                                    ErrorCode::kInvalidArgument, {"gather to process 2"}));
  expect_nothing_written();
}

TEST_F(ExportFailureTest, AFailureOnOneProcessLeavesNothingAtTheOutput) {
  for (const std::optional<int> gather : {std::optional<int>(), std::optional<int>(0)}) {
    std::atomic<int> blocks = 0;
    testing::run_ranks(3, [&](Transport& transport) {
      ExportOptions options;
      options.block_bytes = 64;
      options.gather_to = gather;
      options.progress = [&, rank = transport.rank()](uint64_t) {
        if (rank == 1 && ++blocks == 3) throw Error(ErrorCode::kIo, "injected failure on rank 1");
      };
      EXPECT_TRUE(testing::throws_error(
          [&] { export_checkpoint(dir_ / "ckpt", dir_ / "out", *tensor_map_preset("levanter-llama"), transport, options); },
          transport.rank() == 1 ? ErrorCode::kIo : ErrorCode::kPeerFailed, {"injected failure on rank 1"}));
    });
    expect_nothing_written();
  }
}

TEST_F(ExportFailureTest, AFailedReplaceKeepsTheFolderThatWasThere) {
  fs::create_directories(dir_ / "out");
  {
    std::ofstream(dir_ / "out" / "model.safetensors") << "old weights";
  }
  ExportOptions refused;
  EXPECT_TRUE(testing::throws_error([&] { run_export(2, *tensor_map_preset("levanter-llama"), refused); },
                                    ErrorCode::kAlreadyExists, {(dir_ / "out").string()}));
  std::atomic<bool> failed = false;
  testing::run_ranks(2, [&](Transport& transport) {
    ExportOptions options;
    options.replace = true;
    options.progress = [&, rank = transport.rank()](uint64_t) {
      if (rank == 0 && !failed.exchange(true)) throw Error(ErrorCode::kIo, "injected failure on rank 0");
    };
    EXPECT_ANY_THROW(export_checkpoint(dir_ / "ckpt", dir_ / "out", *tensor_map_preset("levanter-llama"), transport, options));
  });
  EXPECT_EQ(testing::read_folder_files(dir_ / "out"), (std::map<std::string, std::string>{{"model.safetensors", "old weights"}}));
}

}  // namespace
}  // namespace reshard
