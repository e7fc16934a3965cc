// `export` of a Levanter-style checkpoint saved by 2 ranks, run by 1 to 3
// ranks: every Hugging Face tensor equals the loops of levanter_reference,
// merged weights equal a dense merge written here, and the folder is
// byte-identical however the work is shared.
#include "reshard/pipelines/export_model.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "execute/support/rank_threads.h"
#include "layout/float_convert.h"
#include "pipelines/support/export_files.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/hf_index.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard {

using layout_detail::bf16_to_f32;
using layout_detail::f32_to_bf16;

namespace {

namespace fs = std::filesystem;
using testing::FrameworkTensor;
using testing::HfTensor;
using testing::LevanterDims;

constexpr const char* kHfConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "torch_dtype": "float32"})";

LoraConfig test_lora_config(bool rslora) {
  LoraConfig config;
  config.r = 2;
  config.lora_alpha = 4;
  config.use_rslora = rslora;
  config.alpha_pattern = {{"v_proj", 8.0}};
  config.base_model_name_or_path = "test/llama";
  return config;
}

safetensors::Metadata checkpoint_metadata(const LoraConfig& config) {
  return {{std::string(kHfConfigMetadataKey), kHfConfig}, {std::string(kLoraConfigMetadataKey), lora_config_json(config)}};
}

class ExportTest : public ::testing::Test {
 protected:
  void save(DType base_dtype, bool rslora = false) {
    std::mt19937_64 rng = testing::seeded_rng();
    model_ = testing::levanter_model(dims_, base_dtype, rng);
    reference_ = testing::levanter_reference(model_, dims_);
    testing::save_levanter_checkpoint(model_, dir_ / "ckpt", checkpoint_metadata(test_lora_config(rslora)));
  }

  void export_with(int ranks, const fs::path& out, const ExportOptions& options) {
    const TensorMap map = *tensor_map_preset("levanter-llama");
    testing::run_ranks(ranks, [&](Transport& transport) {
      const ExportResult result = export_checkpoint(dir_ / "ckpt", out, map, transport, options);
      EXPECT_GT(result.tensors, 0u);
    });
  }

  // The merged weight W + (B @ A) * scaling in f32, k in order, as W's dtype.
  std::vector<float> dense_merge(const std::string& module, float scaling, DType w_dtype) const {
    const HfTensor& w = reference_.at(module + ".weight");
    const HfTensor& a = reference_.at("base_model.model." + module + ".lora_A.weight");
    const HfTensor& b = reference_.at("base_model.model." + module + ".lora_B.weight");
    const int64_t rows = w.shape[0], cols = w.shape[1], r = a.shape[0];
    std::vector<float> out;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        float sum = 0;
        for (int64_t k = 0; k < r; ++k) {
          sum += b.values[static_cast<size_t>(i * r + k)] * a.values[static_cast<size_t>(k * cols + j)];
        }
        const float merged = w.values[static_cast<size_t>(i * cols + j)] + sum * scaling;
        out.push_back(w_dtype == DType::kBF16 ? bf16_to_f32(f32_to_bf16(merged)) : merged);
      }
    }
    return out;
  }

  LevanterDims dims_;
  std::vector<FrameworkTensor> model_;
  std::map<std::string, HfTensor> reference_;
  testing::TempDir dir_;
};

bool is_adapter_key(const std::string& name) { return name.starts_with("base_model.model."); }

TEST_F(ExportTest, ModelFolderEqualsTheLoopsAtAnyProcessCount) {
  save(DType::kF32);
  for (const int ranks : {1, 3}) {
    const fs::path out = dir_ / fmt::format("hf{}", ranks);
    ExportOptions options;
    options.block_bytes = 100;        // several blocks per tensor, rows cut mid-way through merged axes
    options.max_shard_size = 2000;    // several files and an index
    export_with(ranks, out, options);
    const auto written = testing::read_folder_tensors(out);
    size_t expected = 0;
    for (const auto& [name, tensor] : reference_) {
      if (is_adapter_key(name)) continue;
      ++expected;
      ASSERT_TRUE(written.contains(name)) << name;
      const testing::WrittenTensor& got = written.at(name);
      EXPECT_EQ(got.dtype, DType::kF32) << name;
      EXPECT_EQ(got.shape, tensor.shape) << name;
      EXPECT_EQ(got.bytes, testing::encode(tensor.values, DType::kF32)) << name << " at " << ranks << " ranks";
    }
    EXPECT_EQ(written.size(), expected);
    EXPECT_TRUE(fs::exists(out / kHfIndexFileName));
    EXPECT_EQ(nlohmann::json::parse(testing::read_folder_files(out).at("config.json")),
              nlohmann::json::parse(kHfConfig));
  }
  EXPECT_EQ(testing::read_folder_files(dir_ / "hf1"), testing::read_folder_files(dir_ / "hf3"));
}

TEST_F(ExportTest, CastToBf16RoundsToNearestEvenAndUpdatesTorchDtype) {
  save(DType::kF32);
  ExportOptions options;
  options.dtype = DType::kBF16;
  options.block_bytes = 64;
  export_with(2, dir_ / "hf", options);
  const auto written = testing::read_folder_tensors(dir_ / "hf");
  for (const auto& [name, tensor] : reference_) {
    if (is_adapter_key(name)) continue;
    ASSERT_TRUE(written.contains(name)) << name;
    EXPECT_EQ(written.at(name).dtype, DType::kBF16);
    EXPECT_EQ(written.at(name).bytes, testing::encode(tensor.values, DType::kBF16)) << name;
  }
  const auto config = nlohmann::json::parse(testing::read_folder_files(dir_ / "hf").at("config.json"));
  EXPECT_EQ(config["torch_dtype"], "bfloat16");
}

void expect_merged(const std::map<std::string, testing::WrittenTensor>& written,
                   const std::map<std::string, HfTensor>& reference, const std::function<std::vector<float>(
                       const std::string&, float)>& merge, const LoraConfig& config, DType dtype, int layers) {
  size_t expected = 0;
  for (const auto& [name, tensor] : reference) {
    if (is_adapter_key(name)) {
      EXPECT_FALSE(written.contains(name)) << name;
      continue;
    }
    ++expected;
    ASSERT_TRUE(written.contains(name)) << name;
    EXPECT_EQ(written.at(name).dtype, dtype) << name;
    std::vector<float> values = tensor.values;
    for (int l = 0; l < layers; ++l) {
      for (const char* module : {"self_attn.q_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.down_proj"}) {
        const std::string path = fmt::format("model.layers.{}.{}", l, module);
        if (name != path + ".weight") continue;
        const double alpha = std::string_view(module) == "self_attn.v_proj" ? 8.0 : config.lora_alpha;
        const double divisor = config.use_rslora ? std::sqrt(static_cast<double>(config.r)) : static_cast<double>(config.r);
        values = merge(path, static_cast<float>(alpha / divisor));
      }
    }
    EXPECT_EQ(written.at(name).bytes, testing::encode(values, dtype)) << name;
  }
  EXPECT_EQ(written.size(), expected);
}

TEST_F(ExportTest, MergedF32EqualsADenseMerge) {
  save(DType::kF32, /*rslora=*/true);
  ExportOptions options;
  options.kind = ExportKind::kMergedModel;
  options.block_bytes = 48;
  export_with(3, dir_ / "merged", options);
  expect_merged(testing::read_folder_tensors(dir_ / "merged"), reference_,
                [&](const std::string& m, float s) { return dense_merge(m, s, DType::kF32); }, test_lora_config(true),
                DType::kF32, static_cast<int>(dims_.layers));
}

TEST_F(ExportTest, MergedBf16EqualsADenseMergeRoundedToBf16) {
  save(DType::kBF16);
  ExportOptions options;
  options.kind = ExportKind::kMergedModel;
  options.block_bytes = 40;
  export_with(2, dir_ / "merged", options);
  expect_merged(testing::read_folder_tensors(dir_ / "merged"), reference_,
                [&](const std::string& m, float s) { return dense_merge(m, s, DType::kBF16); }, test_lora_config(false),
                DType::kBF16, static_cast<int>(dims_.layers));
}

TEST_F(ExportTest, GatherToOneProcessWritesTheSameBytes) {
  save(DType::kBF16);
  for (const ExportKind kind : {ExportKind::kModel, ExportKind::kMergedModel, ExportKind::kAdapterOnly}) {
    ExportOptions options;
    options.kind = kind;
    options.block_bytes = 64;
    options.max_shard_size = 1500;
    export_with(3, dir_ / "shared", options);
    options.gather_to = 0;
    export_with(3, dir_ / "gathered0", options);
    options.gather_to = 2;
    export_with(3, dir_ / "gathered2", options);
    const auto shared = testing::read_folder_files(dir_ / "shared");
    EXPECT_EQ(shared, testing::read_folder_files(dir_ / "gathered0"));
    EXPECT_EQ(shared, testing::read_folder_files(dir_ / "gathered2"));
    for (const char* name : {"shared", "gathered0", "gathered2"}) fs::remove_all(dir_ / name);
  }
}

TEST_F(ExportTest, ExportArraysWritesWhatTheCheckpointExportWrites) {
  save(DType::kF32);
  const TensorMap map = *tensor_map_preset("levanter-llama");
  for (const ExportKind kind : {ExportKind::kModel, ExportKind::kMergedModel, ExportKind::kAdapterOnly}) {
    ExportOptions options;
    options.kind = kind;
    options.block_bytes = 64;
    options.lora_config = test_lora_config(false);
    options.hf_config_json = kHfConfig;
    export_with(2, dir_ / "from-ckpt", options);
    for (const std::optional<int> gather : {std::optional<int>(), std::optional<int>(1)}) {
      options.gather_to = gather;
      testing::run_ranks(2, [&](Transport& transport) {
        const std::vector<NamedArray> arrays = testing::levanter_arrays(model_, transport.rank());
        export_arrays(arrays, dir_ / "from-arrays", map, transport, options);
      });
      EXPECT_EQ(testing::read_folder_files(dir_ / "from-arrays"), testing::read_folder_files(dir_ / "from-ckpt"))
          << static_cast<int>(kind) << (gather ? " gathered" : " shared");
      fs::remove_all(dir_ / "from-arrays");
    }
    fs::remove_all(dir_ / "from-ckpt");
  }
}

}  // namespace
}  // namespace reshard
