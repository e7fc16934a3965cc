// `reshard merge-lora`: the merged folder, exit codes and messages, atomic
// output, and peak memory against the largest tensor rather than the model.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/support/run_reshard.h"
#include "formats/hf_folder_writer.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/pipelines/lora_config.h"
#include "reshard/pipelines/peft_adapter.h"
#include "support/seed.h"

extern char** environ;

namespace reshard {

using formats_detail::write_produced_file;

namespace {

namespace fs = std::filesystem;
using testing::peak_rss_kib;
using testing::run_reshard;
using testing::TempFolder;

std::vector<float> random_floats(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

// A base model of `layers` [rows, cols] f32 weights (plus a norm) and an
// adapter of rank `r` on every other one.
struct Model {
  std::vector<std::string> names;
  std::vector<std::vector<float>> weights;
  std::vector<std::vector<float>> a, b;  // per adapted weight (even indices)
};

Model write_model(const fs::path& base, const fs::path& adapter, int layers, int64_t rows, int64_t cols, int64_t r,
                  std::mt19937_64& rng, const std::string& module_prefix = "model.layers.") {
  Model model;
  fs::create_directories(base);
  std::vector<safetensors::TensorData> data;
  for (int i = 0; i < layers; ++i) {
    model.names.push_back(fmt::format("model.layers.{}.mlp.up_proj", i));
    model.weights.push_back(random_floats(static_cast<size_t>(rows * cols), rng));
  }
  for (int i = 0; i < layers; ++i) {
    data.push_back({{model.names[static_cast<size_t>(i)] + ".weight", DType::kF32, safetensors::dims_of({rows, cols})},
                    std::as_bytes(std::span(model.weights[static_cast<size_t>(i)]))});
  }
  safetensors::write_file(base / "model.safetensors", data);
  testing::write_bytes(base / "config.json", "{\n  \"model_type\": \"llama\"\n}\n");

  std::vector<safetensors::TensorSpec> specs;
  for (int i = 0; i < layers; i += 2) {
    model.a.push_back(random_floats(static_cast<size_t>(r * cols), rng));
    model.b.push_back(random_floats(static_cast<size_t>(rows * r), rng));
    const std::string module = module_prefix + std::to_string(i) + ".mlp.up_proj";
    specs.push_back({adapter_key(module, AdapterKey::Factor::kA), DType::kF32, safetensors::dims_of({r, cols})});
    specs.push_back({adapter_key(module, AdapterKey::Factor::kB), DType::kF32, safetensors::dims_of({rows, r})});
  }
  LoraConfig config;
  config.r = r;
  config.lora_alpha = 16;
  config.target_modules = {"up_proj"};
  write_peft_adapter(config, specs, [&](const safetensors::TensorInfo& tensor, const ByteSink& sink) {
    const int layer = std::stoi(tensor.name.substr(tensor.name.find("layers.") + 7));
    const auto& factor = tensor.name.ends_with("lora_A.weight") ? model.a : model.b;
    sink(std::as_bytes(std::span(factor[static_cast<size_t>(layer / 2)])));
  }, adapter);
  return model;
}

std::vector<float> read_f32(const HfFolder& folder, const std::string& name) {
  const TensorCatalog::Entry* entry = folder.catalog.find(name);
  if (entry == nullptr) return {};
  std::vector<float> values(static_cast<size_t>(entry->info->elements()));
  folder.catalog.file_of(*entry).read(*entry->info, std::as_writable_bytes(std::span(values)));
  return values;
}

TEST(MergeLoraCommand, WritesTheMergedFolder) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  const int64_t rows = 6, cols = 5, r = 2;
  const Model model = write_model(dir / "base", dir / "adapter", 3, rows, cols, r, rng);
  const auto result = run_reshard({"merge-lora", (dir / "base").string(), (dir / "adapter").string(),
                                   (dir / "merged").string(), "--max-shard-size", "150"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(result.err.empty()) << result.err;
  EXPECT_NE(result.out.find("3 tensors, 2 merged"), std::string::npos) << result.out;
  const HfFolder merged = HfFolder::open(dir / "merged");
  EXPECT_EQ(merged.kind, HfFolderKind::kIndexed);  // 120-byte tensors, 150-byte files
  EXPECT_EQ(testing::read_bytes(dir / "merged" / "config.json"), testing::read_bytes(dir / "base" / "config.json"));
  for (int i = 0; i < 3; ++i) {
    const std::vector<float>& w = model.weights[static_cast<size_t>(i)];
    std::vector<float> expected = w;
    if (i % 2 == 0) {
      const auto& a = model.a[static_cast<size_t>(i / 2)];
      const auto& b = model.b[static_cast<size_t>(i / 2)];
      for (int64_t p = 0; p < rows; ++p) {
        for (int64_t q = 0; q < cols; ++q) {
          float sum = 0;
          for (int64_t k = 0; k < r; ++k) sum += b[static_cast<size_t>(p * r + k)] * a[static_cast<size_t>(k * cols + q)];
          expected[static_cast<size_t>(p * cols + q)] += sum * 8.0f;  // alpha 16 / r 2
        }
      }
    }
    EXPECT_EQ(read_f32(merged, model.names[static_cast<size_t>(i)] + ".weight"), expected) << i;
  }
}

TEST(MergeLoraCommand, ErrorsNameTheKeyAndLeaveNothingBehind) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  write_model(dir / "base", dir / "adapter", 2, 4, 4, 2, rng, "layers.");  // keys lack "model."
  const auto result = run_reshard({"merge-lora", (dir / "base").string(), (dir / "adapter").string(),
                                   (dir / "merged").string()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(result.err.starts_with("error: ")) << result.err;
  EXPECT_NE(result.err.find("'base_model.model.layers.0.mlp.up_proj.lora_A.weight'"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("model.layers.0.mlp.up_proj"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(dir / "merged"));

  const auto usage = run_reshard({"merge-lora", (dir / "base").string(), (dir / "adapter").string(),
                                  (dir / "merged").string(), "--dtype", "i8"});
  EXPECT_EQ(usage.exit_code, 2) << usage.err;
  const auto missing = run_reshard({"merge-lora", (dir / "base").string()});
  EXPECT_EQ(missing.exit_code, 2);
}

// Whatever is wrong in an input file is exit 1 (the operation failed), never 2
// (kept for usage errors), with the file and the field or key named.
TEST(MergeLoraCommand, BadAdapterFilesExitOneNamingTheFaultAndWriteNothing) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  write_model(dir / "base", dir / "adapter", 2, 4, 4, 2, rng);
  const std::string good_config = testing::read_bytes(dir / "adapter" / "adapter_config.json");
  const struct {
    std::string config;
    std::vector<std::string> named;
  } cases[] = {
      {"{ not json", {"adapter_config.json", "not valid JSON"}},
      {"[1, 2]", {"adapter_config.json", "JSON object"}},
      {R"({"peft_type": "IA3", "target_modules": ["up_proj"]})", {"adapter_config.json", "peft_type 'IA3'"}},
      {R"({"peft_type": "LORA", "r": "two"})", {"adapter_config.json", "'r'"}},
      {R"({"peft_type": "LORA", "r": 2, "rank_pattern": {"(": 2}})", {"rank_pattern", "'('"}},
      {R"({"peft_type": "LORA", "r": 2, "use_dora": true})", {"use_dora", "lora_magnitude_vector"}},
      {R"({"peft_type": "LORA", "r": 2, "modules_to_save": 7})", {"modules_to_save"}},
  };
  for (const auto& c : cases) {
    testing::write_bytes(dir / "adapter" / "adapter_config.json", c.config);
    const auto result = run_reshard({"merge-lora", (dir / "base").string(), (dir / "adapter").string(),
                                     (dir / "merged").string()});
    EXPECT_EQ(result.exit_code, 1) << c.config << ": " << result.err;
    EXPECT_TRUE(result.err.starts_with("error: ")) << result.err;
    for (const std::string& part : c.named) EXPECT_NE(result.err.find(part), std::string::npos) << result.err;
    EXPECT_FALSE(fs::exists(dir / "merged")) << c.config;
  }
  testing::write_bytes(dir / "adapter" / "adapter_config.json", good_config);
  testing::write_bytes(dir / "base" / "config.json", "{ broken");
  const auto bad_base = run_reshard({"merge-lora", (dir / "base").string(), (dir / "adapter").string(),
                                     (dir / "merged").string(), "--dtype", "bf16"});
  EXPECT_EQ(bad_base.exit_code, 1) << bad_base.err;
  EXPECT_NE(bad_base.err.find("config.json"), std::string::npos) << bad_base.err;
  EXPECT_FALSE(fs::exists(dir / "merged"));
}

TEST(MergeLoraCommand, RefusesAnExistingOutputUnlessForced) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  write_model(dir / "base", dir / "adapter", 2, 4, 4, 2, rng);
  const std::vector<std::string> args = {"merge-lora", (dir / "base").string(), (dir / "adapter").string(),
                                         (dir / "merged").string()};
  ASSERT_EQ(run_reshard(args).exit_code, 0);
  testing::write_bytes(dir / "merged" / "README.md", "keep me");
  const auto again = run_reshard(args);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  std::vector<std::string> forced = args;
  forced.push_back("--force");
  EXPECT_EQ(run_reshard(forced).exit_code, 0);
  EXPECT_EQ(testing::read_bytes(dir / "merged" / "README.md"), "keep me");
}

TEST(MergeLoraCommand, HelpHasAnExample) {
  const auto result = run_reshard({"merge-lora", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.out.find("reshard merge-lora llama-7b/ my-adapter/"), std::string::npos) << result.out;
}

// A base of `layers` [rows, cols] f32 weights written one at a time from one
// buffer, and a rank-8 adapter on every other one: the test process itself
// stays small, since a child's peak RSS counts its parent's until exec.
void write_large_model(const fs::path& base, const fs::path& adapter, int layers, int64_t rows, int64_t cols,
                       std::mt19937_64& rng) {
  const int64_t r = 8;
  fs::create_directories(base);
  std::vector<safetensors::TensorSpec> weights, factors;
  for (int i = 0; i < layers; ++i) {
    weights.push_back({fmt::format("model.layers.{}.mlp.up_proj.weight", i), DType::kF32, safetensors::dims_of({rows, cols})});
    if (i % 2 != 0) continue;
    const std::string module = fmt::format("model.layers.{}.mlp.up_proj", i);
    factors.push_back({adapter_key(module, AdapterKey::Factor::kA), DType::kF32, safetensors::dims_of({r, cols})});
    factors.push_back({adapter_key(module, AdapterKey::Factor::kB), DType::kF32, safetensors::dims_of({rows, r})});
  }
  // Enough values for the largest of W, A and B.
  const std::vector<float> values = random_floats(static_cast<size_t>(std::max({rows * cols, r * cols, rows * r})), rng);
  const auto produce = [&](const safetensors::TensorInfo& tensor, const ByteSink& sink) {
    sink(std::as_bytes(std::span(values)).first(static_cast<size_t>(tensor.byte_size())));
  };
  write_produced_file(base / "model.safetensors", safetensors::FileLayout::plan(weights), produce);
  LoraConfig config;
  config.r = r;
  write_peft_adapter(config, factors, produce, adapter);
}

// 96 MiB of weights in 4 MiB tensors: the merge's memory beyond what the
// process needs anyway (measured on a tiny model) stays within a few tensors.
TEST(MergeLoraCommand, PeakMemoryIsBoundedByTheLargestTensorNotTheModel) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's quarantine keeps freed memory resident: peak RSS says nothing here";
#endif
  auto rng = testing::seeded_rng();
  TempFolder dir;
  const int64_t rows = 512, cols = 2048, layers = 24;
  write_large_model(dir / "tiny", dir / "tiny-adapter", 2, 4, 4, rng);
  write_large_model(dir / "base", dir / "adapter", layers, rows, cols, rng);
  const long tiny = peak_rss_kib({"merge-lora", (dir / "tiny").string(), (dir / "tiny-adapter").string(),
                                  (dir / "tiny-out").string()});
  const long big = peak_rss_kib({"merge-lora", (dir / "base").string(), (dir / "adapter").string(),
                                 (dir / "out").string()});
  ASSERT_GT(tiny, 0);
  ASSERT_GT(big, 0);
  const long tensor_kib = rows * cols * 4 / 1024, model_kib = tensor_kib * layers;
  std::cout << "[ figures  ] merge-lora peak RSS " << big << " KiB, on a tiny model " << tiny << " KiB; model "
            << model_kib << " KiB, largest tensor " << tensor_kib << " KiB\n";
  EXPECT_LT(big - tiny, 4 * tensor_kib) << "peak grew by " << big - tiny << " KiB";
  EXPECT_LT(big - tiny, model_kib / 4);
}

}  // namespace
}  // namespace reshard
