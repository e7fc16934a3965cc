// `export --adapter-only`: a PEFT adapter folder as hf-peft.md describes it,
// field by field, and adapter keys checked against the base model.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "execute/support/rank_threads.h"
#include "layout/support/expect_error.h"
#include "pipelines/support/export_files.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/pipelines/export_model.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;

LoraConfig adapter_config() {
  LoraConfig config = testing::levanter_lora_config();
  config.target_modules = {"ignored"};  // the export writes the modules its keys adapt
  config.alpha_pattern = {{"v_proj", 8.0}};
  return config;
}

class ExportAdapterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng = testing::seeded_rng();
    model_ = testing::levanter_model(dims_, DType::kBF16, rng);
    reference_ = testing::levanter_reference(model_, dims_);
    testing::save_levanter_checkpoint(
        model_, dir_ / "ckpt", safetensors::Metadata{{std::string(kLoraConfigMetadataKey), lora_config_json(adapter_config())}});
  }

  void export_adapter(int ranks, const fs::path& out, const TensorMap& map, const ExportOptions& extra = {}) {
    ExportOptions options = extra;
    options.kind = ExportKind::kAdapterOnly;
    testing::run_ranks(ranks, [&](Transport& transport) { export_checkpoint(dir_ / "ckpt", out, map, transport, options); });
  }

  testing::LevanterDims dims_;
  std::vector<testing::FrameworkTensor> model_;
  std::map<std::string, testing::HfTensor> reference_;
  testing::TempDir dir_;
};

TEST_F(ExportAdapterTest, FolderFollowsPeftFieldByField) {
  export_adapter(3, dir_ / "adapter", *tensor_map_preset("levanter-llama"));
  const auto files = testing::read_folder_files(dir_ / "adapter");
  ASSERT_EQ(files.size(), 2u);
  ASSERT_TRUE(files.contains("adapter_model.safetensors"));
  const std::string& text = files.at("adapter_config.json");
  const nlohmann::json config = nlohmann::json::parse(text);
  EXPECT_EQ(text, config.dump(2));  // sorted keys, two-space indent, no trailing newline
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["task_type"], "CAUSAL_LM");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["lora_alpha"], 4);
  EXPECT_EQ(config["lora_dropout"], 0.0);
  EXPECT_EQ(config["target_modules"], nlohmann::json::parse(R"(["down_proj", "o_proj", "q_proj", "v_proj"])"));
  EXPECT_EQ(config["bias"], "none");
  EXPECT_EQ(config["fan_in_fan_out"], false);
  EXPECT_EQ(config["use_rslora"], false);
  EXPECT_EQ(config["inference_mode"], true);
  EXPECT_EQ(config["base_model_name_or_path"], "test/llama");
  EXPECT_TRUE(config["modules_to_save"].is_null());
  EXPECT_EQ(config["rank_pattern"], nlohmann::json::object());
  EXPECT_EQ(config["alpha_pattern"], nlohmann::json::parse(R"({"v_proj": 8.0})"));

  const HfFolder folder = HfFolder::open(dir_ / "adapter");
  EXPECT_EQ(folder.kind, HfFolderKind::kPeftAdapter);
  EXPECT_EQ(folder.catalog.metadata(), (safetensors::Metadata{{"format", "pt"}}));
  const auto written = testing::read_folder_tensors(dir_ / "adapter");
  size_t expected = 0;
  for (const auto& [name, tensor] : reference_) {
    if (!name.starts_with("base_model.model.")) continue;
    ++expected;
    ASSERT_TRUE(written.contains(name)) << name;
    const testing::WrittenTensor& got = written.at(name);
    EXPECT_EQ(got.dtype, DType::kF32);
    EXPECT_EQ(got.shape, tensor.shape) << name;
    if (name.ends_with(".lora_A.weight")) {
      EXPECT_EQ(got.shape[0], dims_.r) << name;  // [r, in]
    } else {
      EXPECT_EQ(got.shape[1], dims_.r) << name;  // [out, r]
    }
    EXPECT_EQ(got.bytes, testing::encode(tensor.values, DType::kF32)) << name;
  }
  EXPECT_EQ(written.size(), expected);
  EXPECT_TRUE(written.contains("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"));
}

TEST_F(ExportAdapterTest, KeysNamingNoModuleOfTheBaseAreAnError) {
  // A base whose module paths lack the "model." part the keys have.
  std::vector<std::vector<std::byte>> bytes;
  std::vector<safetensors::TensorData> data;
  const std::vector<std::string> names = {"layers.0.self_attn.q_proj.weight", "layers.0.self_attn.v_proj.weight"};
  bytes.resize(names.size(), std::vector<std::byte>(16));
  for (size_t i = 0; i < names.size(); ++i) data.push_back({{names[i], DType::kF32, {2, 2}}, bytes[i]});
  fs::create_directories(dir_ / "base");
  safetensors::write_file(dir_ / "base" / "model.safetensors", data);
  ExportOptions options;
  options.base = dir_ / "base";
  EXPECT_TRUE(testing::throws_error([&] { export_adapter(2, dir_ / "adapter", *tensor_map_preset("levanter-llama"), options); },
                                    ErrorCode::kMissingTensor,
                                    {"adapter key 'base_model.model.model.layers.0.", (dir_ / "base").string(),
                                     "the base has 'layers.0."}));
  EXPECT_FALSE(fs::exists(dir_ / "adapter"));
}

TEST_F(ExportAdapterTest, AWrongPrefixInTheMapIsCaughtAgainstTheModelItself) {
  std::string json = tensor_map_json(*tensor_map_preset("levanter-llama"));
  for (size_t at = json.find("base_model.model.model."); at != std::string::npos; at = json.find("base_model.model.model.")) {
    json.replace(at, 23, "base_model.model.");
  }
  EXPECT_TRUE(testing::throws_error([&] { export_adapter(2, dir_ / "adapter", parse_tensor_map(json, "map.json")); },
                                    ErrorCode::kMissingTensor,
                                    {"adapter key 'base_model.model.layers.0.", "prefix wrong", "--base"}));
  EXPECT_FALSE(fs::exists(dir_ / "adapter"));
}

TEST_F(ExportAdapterTest, ACheckpointOfTheFactorsAloneExportsTheSameAdapter) {
  // A LoRA run saves only what it trains: no base weight to check the keys against, yet the same adapter.
  export_adapter(2, dir_ / "full", *tensor_map_preset("levanter-llama"));
  std::vector<testing::FrameworkTensor> factors;
  for (const auto& tensor : model_) {
    if (tensor.name.find(".lora.") != std::string::npos) factors.push_back(tensor);
  }
  ASSERT_FALSE(factors.empty());
  testing::save_levanter_checkpoint(
      factors, dir_ / "ckpt", safetensors::Metadata{{std::string(kLoraConfigMetadataKey), lora_config_json(adapter_config())}});
  export_adapter(3, dir_ / "alone", *tensor_map_preset("levanter-llama"));
  EXPECT_EQ(testing::read_folder_files(dir_ / "alone"), testing::read_folder_files(dir_ / "full"));

  // The factors are still checked against each other and the config: another rank is refused by name.
  LoraConfig other = adapter_config();
  other.r = 3;
  ExportOptions options;
  options.lora_config = other;
  EXPECT_TRUE(testing::throws_error(
      [&] { export_adapter(1, dir_ / "wrong", *tensor_map_preset("levanter-llama"), options); },
      ErrorCode::kInvalidArgument, {"the config gives rank 3"}));
}

TEST_F(ExportAdapterTest, WithoutALoraConfigIsAnError) {
  testing::save_levanter_checkpoint(model_, dir_ / "ckpt", std::nullopt);
  EXPECT_TRUE(testing::throws_error([&] { export_adapter(2, dir_ / "adapter", *tensor_map_preset("levanter-llama")); },
                                    kNoLoraConfig, {"no LoRA config", "reshard.lora_config"}));
  ExportOptions options;
  options.lora_config = adapter_config();
  export_adapter(1, dir_ / "adapter", *tensor_map_preset("levanter-llama"), options);
  EXPECT_TRUE(fs::exists(dir_ / "adapter" / "adapter_config.json"));
}

// The variants themselves are tested in export_lora_variants_test.cpp; here,
// what a Levanter checkpoint lacks for the config it comes with is refused
// by name before anything is written, never merged as something else.
TEST_F(ExportAdapterTest, WhatTheCheckpointLacksForItsConfigIsRefusedByName) {
  LoraConfig config = adapter_config();
  config.use_dora = true;  // but the checkpoint has no magnitudes
  ExportOptions options;
  options.lora_config = config;
  EXPECT_TRUE(testing::throws_error(
      [&] { export_adapter(1, dir_ / "adapter", *tensor_map_preset("levanter-llama"), options); },
      ErrorCode::kUnsupported, {"use_dora", "lora_magnitude_vector"}));
  options.kind = ExportKind::kMergedModel;
  EXPECT_TRUE(testing::throws_error(
      [&] { testing::run_ranks(2, [&](Transport& t) { export_checkpoint(dir_ / "ckpt", dir_ / "merged", *tensor_map_preset("levanter-llama"), t, options); }); },
      ErrorCode::kUnsupported, {"use_dora", "lora_magnitude_vector"}));
  EXPECT_FALSE(fs::exists(dir_ / "adapter"));
  EXPECT_FALSE(fs::exists(dir_ / "merged"));
  // The preset with q_proj's lora_A written under DoRA's magnitude name.
  std::string json = tensor_map_json(*tensor_map_preset("levanter-llama"));
  const std::string a_name = "self_attn.q_proj.lora_A.weight\"";
  json.replace(json.rfind(a_name), a_name.size(), "self_attn.q_proj.lora_magnitude_vector\"");
  const TensorMap map = parse_tensor_map(json, "map.json");
  EXPECT_TRUE(testing::throws_error([&] { export_adapter(1, dir_ / "adapter", map); }, ErrorCode::kMissingTensor,
                                    {"q_proj", "no lora_A"}));
  EXPECT_FALSE(fs::exists(dir_ / "adapter"));
}

}  // namespace
}  // namespace reshard
