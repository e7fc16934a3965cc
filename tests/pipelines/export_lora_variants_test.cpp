// export --merge-lora and --adapter-only for the PEFT LoRA variants (DoRA on
// a Linear and on an embedding, lora_bias, modules_to_save): the merged model
// equals merge-lora's from the same base and adapter folders byte for byte
// (merge-lora is checked against loops written from PEFT's formulas in the
// Python tests, and against PEFT itself by scripts/check-hf-clients.sh), from
// sharded arrays and from a checkpoint, on 1-3 ranks, gathered or not, in
// blocks of a row or two. The adapter keeps every key and config field.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>

#include "execute/support/rank_threads.h"
#include "layout/float_convert.h"
#include "pipelines/support/export_files.h"
#include "pipelines/support/lora_test_files.h"
#include "reshard/execute/operations.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "reshard/pipelines/export_model.h"
#include "reshard/pipelines/merge_lora.h"
#include "reshard/pipelines/peft_adapter.h"
#include "support/seed.h"

namespace reshard {

using layout_detail::convert_floats;

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kHfConfig = R"({"model_type": "llama", "dtype": "float32"})";

// One tensor of the test, with the spec it is laid out by over 2 processes.
struct Tensor {
  std::string name;
  Shape shape;
  std::string spec;  // over Mesh('x': 2): rows split, columns split, or replicated
  std::vector<std::byte> bytes;
};

std::vector<std::byte> random_bytes(DType dtype, const Shape& shape, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  int64_t count = 1;
  for (const int64_t d : shape) count *= d;
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = dist(rng);
  std::vector<std::byte> bytes(static_cast<size_t>(dtype_byte_size(dtype, static_cast<uint64_t>(count))));
  convert_floats(DType::kF32, std::as_bytes(std::span(values)), dtype, bytes, static_cast<uint64_t>(count));
  return bytes;
}

LoraConfig variants_config() {
  LoraConfig config;
  config.r = 2;
  config.lora_alpha = 3;
  config.target_modules = {"q", "embed"};
  config.alpha_pattern = {{"embed", 5.0}};
  config.use_dora = true;
  config.lora_bias = true;
  config.modules_to_save = {"lm_head"};
  return config;
}

class ExportLoraVariants : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    std::mt19937_64 rng = testing::seeded_rng();
    const std::string p(kPeftKeyPrefix);
    const auto add = [&](std::vector<Tensor>& to, std::string name, Shape shape, std::string spec) {
      to.push_back({std::move(name), shape, std::move(spec), random_bytes(GetParam(), shape, rng)});
    };
    add(base_, "model.q.weight", {6, 5}, "P('x')");           // W [out, in], DoRA rows, rows split
    add(base_, "model.q.bias", {6}, "P()");
    add(base_, "model.embed.weight", {7, 4}, "P(None, 'x')");  // DoRA down columns, no process holds it whole
    add(base_, "model.norm.weight", {4}, "P()");
    add(base_, "lm_head.weight", {7, 4}, "P()");
    add(adapter_, p + "model.q.lora_A.weight", {2, 5}, "P()");
    add(adapter_, p + "model.q.lora_B.weight", {6, 2}, "P('x')");
    add(adapter_, p + "model.q.lora_B.bias", {6}, "P()");
    add(adapter_, p + "model.q.lora_magnitude_vector", {6}, "P()");
    add(adapter_, p + "model.embed.lora_embedding_A", {2, 7}, "P()");
    add(adapter_, p + "model.embed.lora_embedding_B", {4, 2}, "P()");
    add(adapter_, p + "model.embed.lora_magnitude_vector", {4}, "P('x')");
    add(adapter_, p + "lm_head.weight", {7, 4}, "P(None, 'x')");  // the modules_to_save copy
    write_folder(dir_ / "base", base_, "model.safetensors");
    testing::write_text(dir_ / "base" / "config.json", kHfConfig);
    write_folder(dir_ / "adapter", adapter_, "adapter_model.safetensors");
    testing::write_text(dir_ / "adapter" / "adapter_config.json", lora_config_json(config_));
  }

  void write_folder(const fs::path& folder, const std::vector<Tensor>& tensors, const std::string& file) const {
    std::vector<safetensors::TensorData> data;
    for (const Tensor& t : tensors) data.push_back({{t.name, GetParam(), safetensors::dims_of(t.shape)}, t.bytes});
    fs::create_directories(folder);
    safetensors::write_file(folder / file, data);
  }

  // Every tensor to its own name.
  TensorMap identity_map(const std::vector<Tensor>& tensors) const {
    nlohmann::json rules = nlohmann::json::array();
    for (const Tensor& t : tensors) rules.push_back({{"from", t.name}, {"to", t.name}});
    return parse_tensor_map(nlohmann::json{{"rules", rules}}.dump(), "identity.json");
  }

  std::vector<Tensor> all() const {
    std::vector<Tensor> tensors = base_;
    tensors.insert(tensors.end(), adapter_.begin(), adapter_.end());
    return tensors;
  }

  // This process's arrays of `tensors` over Mesh('x': 2), one device per process.
  std::vector<NamedArray> arrays(const std::vector<Tensor>& tensors, Transport& transport) const {
    const Mesh mesh({{"x", 2}}, {0, 1});
    const Topology topology = Topology::uniform(2, 2);
    std::vector<NamedArray> out;
    for (const Tensor& t : tensors) {
      const NamedSharding sharding(mesh, PartitionSpec::parse(t.spec));
      out.push_back({t.name, from_host({t.shape, GetParam(), t.bytes}, sharding, topology, transport)});
    }
    return out;
  }

  ExportOptions options(ExportKind kind) const {
    ExportOptions o;
    o.kind = kind;
    o.lora_config = config_;
    o.hf_config_json = std::string(kHfConfig);
    o.block_bytes = 2 * 4 * 4;  // a row or two of each tensor: DoRA's norms span blocks
    return o;
  }

  void export_arrays_to(const fs::path& out, const std::vector<Tensor>& tensors, const ExportOptions& o) const {
    testing::run_ranks(2, [&](Transport& transport) {
      export_arrays(arrays(tensors, transport), out, identity_map(tensors), transport, o);
    });
  }

  std::map<std::string, testing::WrittenTensor> merge_lora_reference() const {
    MergeLoraOptions merge;
    merge.block_bytes = 16;
    merge_lora_folder(dir_ / "base", dir_ / "adapter", dir_ / "reference", merge);
    return testing::read_folder_tensors(dir_ / "reference");
  }

  LoraConfig config_ = variants_config();
  std::vector<Tensor> base_, adapter_;
  testing::TempDir dir_;
};

void expect_same_tensors(const std::map<std::string, testing::WrittenTensor>& got,
                         const std::map<std::string, testing::WrittenTensor>& expected, std::string_view what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (const auto& [name, tensor] : expected) {
    ASSERT_TRUE(got.contains(name)) << what << ": " << name;
    EXPECT_EQ(got.at(name).dtype, tensor.dtype) << what << ": " << name;
    EXPECT_EQ(got.at(name).shape, tensor.shape) << what << ": " << name;
    EXPECT_EQ(got.at(name).bytes, tensor.bytes) << what << ": " << name;
  }
}

TEST_P(ExportLoraVariants, MergedFromArraysEqualsMergeLoraByteForByte) {
  const auto reference = merge_lora_reference();
  ASSERT_NE(reference.at("model.q.weight").bytes, testing::read_folder_tensors(dir_ / "base").at("model.q.weight").bytes);
  for (const std::optional<int> gather : {std::optional<int>(), std::optional<int>(1)}) {
    ExportOptions o = options(ExportKind::kMergedModel);
    o.gather_to = gather;
    export_arrays_to(dir_ / "merged", all(), o);
    expect_same_tensors(testing::read_folder_tensors(dir_ / "merged"), reference, gather ? "gathered" : "shared");
    fs::remove_all(dir_ / "merged");
  }
}

TEST_P(ExportLoraVariants, MergedFromACheckpointOnOtherRankCountsEqualsMergeLora) {
  const auto reference = merge_lora_reference();
  testing::run_ranks(2, [&](Transport& transport) { save_checkpoint(arrays(all(), transport), dir_ / "ckpt", transport); });
  for (const int ranks : {1, 3}) {
    testing::run_ranks(ranks, [&](Transport& transport) {
      export_checkpoint(dir_ / "ckpt", dir_ / "merged", identity_map(all()), transport, options(ExportKind::kMergedModel));
    });
    expect_same_tensors(testing::read_folder_tensors(dir_ / "merged"), reference, fmt::format("{} ranks", ranks));
    fs::remove_all(dir_ / "merged");
  }
}

TEST_P(ExportLoraVariants, AdapterKeepsEveryKeyAndTheVariantsConfigFields) {
  export_arrays_to(dir_ / "exported", all(), options(ExportKind::kAdapterOnly));
  expect_same_tensors(testing::read_folder_tensors(dir_ / "exported"), testing::read_folder_tensors(dir_ / "adapter"),
                      "adapter");
  const nlohmann::json config = nlohmann::json::parse(testing::read_text(dir_ / "exported" / "adapter_config.json"));
  EXPECT_EQ(config["use_dora"], true);
  EXPECT_EQ(config["lora_bias"], true);
  EXPECT_EQ(config["modules_to_save"], nlohmann::json::parse(R"(["lm_head"])"));
  EXPECT_EQ(config["target_modules"], nlohmann::json::parse(R"(["embed", "q"])"));
  EXPECT_EQ(config["alpha_pattern"], nlohmann::json::parse(R"({"embed": 5.0})"));
}

// What PEFT would not merge or load as asked is refused by name, before
// anything is written, for the merged model and the adapter alike.
TEST_P(ExportLoraVariants, WhatPeftWouldNotMergeIsRefusedByName) {
  const auto without = [&](std::string_view suffix) {
    std::vector<Tensor> tensors = all();
    std::erase_if(tensors, [&](const Tensor& t) { return t.name.ends_with(suffix); });
    return tensors;
  };
  struct Case {
    std::vector<Tensor> tensors;
    LoraConfig config;
    std::vector<std::string> words;
  };
  std::vector<Case> cases;
  cases.push_back({without("q.lora_magnitude_vector"), config_, {"model.q", "use_dora", "lora_magnitude_vector"}});
  LoraConfig no_dora = config_;
  no_dora.use_dora = false;
  cases.push_back({all(), no_dora, {"lora_magnitude_vector", "use_dora is false"}});
  LoraConfig no_bias = config_;
  no_bias.lora_bias = false;
  cases.push_back({all(), no_bias, {"lora_B.bias", "lora_bias is false"}});
  LoraConfig nothing_saved = config_;
  nothing_saved.modules_to_save.clear();
  cases.push_back({all(), nothing_saved, {"base_model.model.lm_head.weight", "modules_to_save"}});
  for (const Case& c : cases) {
    for (const ExportKind kind : {ExportKind::kMergedModel, ExportKind::kAdapterOnly}) {
      ExportOptions o = options(kind);
      o.lora_config = c.config;
      try {
        export_arrays_to(dir_ / "out", c.tensors, o);
        ADD_FAILURE() << "not refused: " << c.words[0];
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
        for (const std::string& word : c.words) EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
      }
      EXPECT_FALSE(fs::exists(dir_ / "out"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ExportLoraVariants, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& param_info) { return std::string(dtype_name(param_info.param)); });

}  // namespace
}  // namespace reshard
