// merge_lora_folder: a split base folder plus an adapter, against a dense
// merge computed here; adapter checks before anything is written.
#include "reshard/pipelines/merge_lora.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "layout/float_convert.h"
#include "layout/support/expect_error.h"
#include "pipelines/support/lora_test_files.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/peft_adapter.h"
#include "support/seed.h"

namespace reshard {

using layout_detail::bf16_to_f32;
using layout_detail::f32_to_bf16;

namespace {

namespace fs = std::filesystem;
using safetensors::TensorSpec;

struct Named {
  TensorSpec spec;
  std::vector<float> values;  // exactly representable in spec.dtype
};

std::vector<std::byte> bytes_of(const Named& t) {
  std::vector<std::byte> bytes;
  for (const float v : t.values) {
    if (t.spec.dtype == DType::kF32) {
      const auto* p = reinterpret_cast<const std::byte*>(&v);
      bytes.insert(bytes.end(), p, p + 4);
    } else {
      const uint16_t bits = f32_to_bf16(v);
      const auto* p = reinterpret_cast<const std::byte*>(&bits);
      bytes.insert(bytes.end(), p, p + 2);
    }
  }
  return bytes;
}

Named random_named(std::string name, DType dtype, Shape shape, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  Named t{{std::move(name), dtype, safetensors::dims_of(shape)}, {}};
  for (int64_t i = 0; i < n; ++i) {
    const float v = dist(rng);
    t.values.push_back(dtype == DType::kBF16 ? bf16_to_f32(f32_to_bf16(v)) : v);
  }
  return t;
}

void write_named(const fs::path& path, const std::vector<Named>& tensors) {
  std::vector<std::vector<std::byte>> storage;
  std::vector<safetensors::TensorData> data;
  for (const Named& t : tensors) storage.push_back(bytes_of(t));
  for (size_t i = 0; i < tensors.size(); ++i) data.push_back({tensors[i].spec, storage[i]});
  safetensors::write_file(path, data);
}

// The reference: W + (B @ A) * scaling, sums in k order, in f32, rounded to W's dtype.
std::vector<std::byte> dense(const Named& w, const Named& a, const Named& b, float scaling) {
  const Shape w_shape = safetensors::layout_shape(w.spec);
  const int64_t out = w_shape[0], in = w_shape[1], r = safetensors::layout_shape(a.spec)[0];
  Named merged = w;
  for (int64_t i = 0; i < out; ++i) {
    for (int64_t j = 0; j < in; ++j) {
      float sum = 0;
      for (int64_t k = 0; k < r; ++k) sum += b.values[static_cast<size_t>(i * r + k)] * a.values[static_cast<size_t>(k * in + j)];
      merged.values[static_cast<size_t>(i * in + j)] = w.values[static_cast<size_t>(i * in + j)] + sum * scaling;
    }
  }
  return bytes_of(merged);  // bytes_of rounds to the dtype
}

std::vector<std::byte> read_tensor(const HfFolder& folder, const std::string& name) {
  const TensorCatalog::Entry* entry = folder.catalog.find(name);
  EXPECT_NE(entry, nullptr) << name;
  if (!entry) return {};
  std::vector<std::byte> bytes(static_cast<size_t>(entry->info->byte_size()));
  folder.catalog.file_of(*entry).read(*entry->info, bytes);
  return bytes;
}

class MergeLoraFolder : public ::testing::TestWithParam<DType> {};

TEST_P(MergeLoraFolder, MergesAdaptedWeightsAndCopiesTheRest) {
  std::mt19937_64 rng = testing::seeded_rng();
  testing::TempDir dir;
  const DType dtype = GetParam();
  const std::string q0 = "model.layers.0.self_attn.q_proj", v1 = "model.layers.1.self_attn.v_proj";
  std::vector<Named> base = {random_named("model.embed_tokens.weight", dtype, {11, 8}, rng),
                             random_named(q0 + ".weight", dtype, {8, 8}, rng),
                             random_named(v1 + ".weight", dtype, {4, 8}, rng),
                             random_named("model.norm.weight", DType::kF32, {8}, rng)};
  // Two base files and an index, written through convert's own writer path.
  fs::create_directories(dir.path() / "base");
  write_named(dir.path() / "base" / "model-00001-of-00002.safetensors", {base[0], base[1]});
  write_named(dir.path() / "base" / "model-00002-of-00002.safetensors", {base[2], base[3]});
  testing::write_text(dir.path() / "base" / "model.safetensors.index.json",
                      R"({"metadata": {}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                      "model.layers.0.self_attn.q_proj.weight": "model-00001-of-00002.safetensors",
                      "model.layers.1.self_attn.v_proj.weight": "model-00002-of-00002.safetensors",
                      "model.norm.weight": "model-00002-of-00002.safetensors"}})");
  testing::write_text(dir.path() / "base" / "config.json",
                      "{\"dtype\": \"float32\", \"text_config\": {\"dtype\": \"float32\"}, \"torch_dtype\": \"float32\"}");

  // q with r = 4 (the config's), v with r = 2 (rank_pattern) and alpha 6 (alpha_pattern).
  const std::vector<Named> adapter = {random_named(adapter_key(q0, AdapterKey::Factor::kA), DType::kF32, {4, 8}, rng),
                                      random_named(adapter_key(q0, AdapterKey::Factor::kB), DType::kF32, {8, 4}, rng),
                                      random_named(adapter_key(v1, AdapterKey::Factor::kA), DType::kBF16, {2, 8}, rng),
                                      random_named(adapter_key(v1, AdapterKey::Factor::kB), DType::kBF16, {4, 2}, rng)};
  fs::create_directories(dir.path() / "adapter");
  write_named(dir.path() / "adapter" / "adapter_model.safetensors", adapter);
  LoraConfig config;
  config.r = 4;
  config.lora_alpha = 8;
  config.use_rslora = true;
  config.rank_pattern = {{"v_proj", 2}};
  config.alpha_pattern = {{"layers\\.1\\.self_attn\\.v_proj", 6}};
  testing::write_text(dir.path() / "adapter" / "adapter_config.json", lora_config_json(config));

  MergeLoraOptions options;
  options.block_bytes = 40;  // a few rows per block: the blocks must join up exactly
  const MergeLoraResult summary = merge_lora_folder(dir.path() / "base", dir.path() / "adapter",
                                                     dir.path() / "merged", options);
  EXPECT_EQ(summary.tensors, 4u);
  EXPECT_EQ(summary.merged, 2u);
  EXPECT_EQ(summary.carried, std::vector<std::string>{"config.json"});

  const HfFolder merged = HfFolder::open(dir.path() / "merged");
  EXPECT_EQ(read_tensor(merged, q0 + ".weight"), dense(base[1], adapter[0], adapter[1], static_cast<float>(8.0 / 2.0)));
  EXPECT_EQ(read_tensor(merged, v1 + ".weight"),
            dense(base[2], adapter[2], adapter[3], static_cast<float>(6.0 / std::sqrt(2.0))));
  EXPECT_EQ(read_tensor(merged, "model.embed_tokens.weight"), bytes_of(base[0]));
  EXPECT_EQ(read_tensor(merged, "model.norm.weight"), bytes_of(base[3]));
  EXPECT_EQ(testing::read_text(dir.path() / "merged" / "config.json"),
            testing::read_text(dir.path() / "base" / "config.json"));

  // With a cast, the merged value rounded to W's dtype is then cast; config.json follows.
  options.dtype = DType::kBF16;
  merge_lora_folder(dir.path() / "base", dir.path() / "adapter", dir.path() / "bf16", options);
  const HfFolder cast = HfFolder::open(dir.path() / "bf16");
  Named q_merged = base[1];
  const std::vector<std::byte> q_bytes = dense(base[1], adapter[0], adapter[1], 4.0f);
  for (size_t i = 0; i < q_merged.values.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(&q_merged.values[i], &q_bytes[i * 4], 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, &q_bytes[i * 2], 2);
      q_merged.values[i] = bf16_to_f32(bits);
    }
  }
  q_merged.spec.dtype = DType::kBF16;
  EXPECT_EQ(read_tensor(cast, q0 + ".weight"), bytes_of(q_merged));
  // Every dtype key follows the cast: transformers 5 reads "dtype", older releases "torch_dtype".
  const nlohmann::json cast_config = nlohmann::json::parse(testing::read_text(dir.path() / "bf16" / "config.json"));
  EXPECT_EQ(cast_config["dtype"], "bfloat16");
  EXPECT_EQ(cast_config["torch_dtype"], "bfloat16");
  EXPECT_EQ(cast_config["text_config"]["dtype"], "bfloat16");
}

INSTANTIATE_TEST_SUITE_P(Bases, MergeLoraFolder, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& param_info) { return std::string(dtype_name(param_info.param)); });

// Weights of a few MiB, so that blocks split over threads: the merged bytes
// are the same for every thread count and block size, and equal the dense
// merge; with DoRA too (its norms summed in block order whatever the threads).
TEST(MergeLoraFolderThreads, EveryThreadCountAndBlockSizeWritesTheSameBytes) {
  std::mt19937_64 rng = testing::seeded_rng();
  testing::TempDir dir;
  const std::string up = "model.layers.0.mlp.up_proj", down = "model.layers.0.mlp.down_proj";
  const std::vector<Named> base = {random_named(up + ".weight", DType::kF32, {2048, 512}, rng),
                                   random_named(down + ".weight", DType::kBF16, {1536, 768}, rng)};
  write_named(dir.path() / "model.safetensors", base);
  std::vector<Named> adapter = {random_named(adapter_key(up, AdapterKey::Factor::kA), DType::kF32, {8, 512}, rng),
                                random_named(adapter_key(up, AdapterKey::Factor::kB), DType::kF32, {2048, 8}, rng),
                                random_named(adapter_key(down, AdapterKey::Factor::kA), DType::kBF16, {8, 768}, rng),
                                random_named(adapter_key(down, AdapterKey::Factor::kB), DType::kBF16, {1536, 8}, rng)};
  LoraConfig config;
  config.r = 8;
  config.lora_alpha = 16;
  const auto write_adapter = [&](const fs::path& folder) {
    fs::create_directories(folder);
    write_named(folder / "adapter_model.safetensors", adapter);
    testing::write_text(folder / "adapter_config.json", lora_config_json(config));
  };
  write_adapter(dir.path() / "lora");
  config.use_dora = true;
  adapter.push_back(random_named("base_model.model." + up + ".lora_magnitude_vector", DType::kF32, {2048}, rng));
  adapter.push_back(random_named("base_model.model." + down + ".lora_magnitude_vector", DType::kBF16, {1536}, rng));
  write_adapter(dir.path() / "dora");

  struct Run {
    int threads;
    size_t block_bytes;
  };
  // One thread, whole weights; three threads on whole weights (each merge
  // splits: at least 1 MiB a thread) and on 1.5 MiB blocks; two on blocks of 5 rows.
  const std::vector<Run> runs = {{1, size_t{64} << 20}, {3, size_t{64} << 20}, {3, size_t{3} << 19}, {2, 5 * 2048}};
  for (const std::string kind : {"lora", "dora"}) {
    std::vector<std::vector<std::byte>> first;
    for (const Run& run : runs) {
      SCOPED_TRACE(fmt::format("{}: {} threads, blocks of {} bytes", kind, run.threads, run.block_bytes));
      MergeLoraOptions options;
      options.threads = run.threads;
      options.block_bytes = run.block_bytes;
      const fs::path out = dir.path() / fmt::format("{}-{}-{}", kind, run.threads, run.block_bytes);
      merge_lora_folder(dir.path() / "model.safetensors", dir.path() / kind, out, options);
      const HfFolder merged = HfFolder::open(out);
      const std::vector<std::vector<std::byte>> bytes = {read_tensor(merged, up + ".weight"),
                                                         read_tensor(merged, down + ".weight")};
      if (first.empty()) first = bytes;
      EXPECT_EQ(bytes[0], first[0]);
      EXPECT_EQ(bytes[1], first[1]);
      if (kind == "lora") {
        EXPECT_EQ(bytes[0], dense(base[0], adapter[0], adapter[1], 2.0f));
        EXPECT_EQ(bytes[1], dense(base[1], adapter[2], adapter[3], 2.0f));
      }
    }
  }
  MergeLoraOptions negative;
  negative.threads = -1;
  EXPECT_TRUE(testing::throws_error(
      [&] { merge_lora_folder(dir.path() / "model.safetensors", dir.path() / "lora", dir.path() / "no", negative); },
      ErrorCode::kInvalidArgument, {"-1 threads"}));
  EXPECT_FALSE(fs::exists(dir.path() / "no"));
}

TEST(MergeLoraFolderErrors, AdapterThatDoesNotFitWritesNothing) {
  std::mt19937_64 rng = testing::seeded_rng();
  testing::TempDir dir;
  const fs::path base = dir.path() / "model.safetensors";
  write_named(base, {random_named("model.layers.0.self_attn.q_proj.weight", DType::kF32, {4, 4}, rng)});
  const auto adapter_with = [&](const std::string& module, Shape a_shape, LoraConfig config) {
    fs::remove_all(dir.path() / "adapter");
    fs::create_directories(dir.path() / "adapter");
    write_named(dir.path() / "adapter" / "adapter_model.safetensors",
                {random_named(adapter_key(module, AdapterKey::Factor::kA), DType::kF32, a_shape, rng),
                 random_named(adapter_key(module, AdapterKey::Factor::kB), DType::kF32, {4, a_shape[0]}, rng)});
    testing::write_text(dir.path() / "adapter" / "adapter_config.json", lora_config_json(config));
  };
  LoraConfig config;
  config.r = 2;
  const fs::path out = dir.path() / "out";
  adapter_with("layers.0.self_attn.q_proj", {2, 4}, config);  // the prefix mistake
  EXPECT_TRUE(testing::throws_error([&] { merge_lora_folder(base, dir.path() / "adapter", out); },
                                    ErrorCode::kMissingTensor,
                                    {"base_model.model.layers.0.self_attn.q_proj.lora_A.weight", "model.safetensors"}));
  adapter_with("model.layers.0.self_attn.q_proj", {3, 4}, config);  // rank 3, config says 2
  EXPECT_TRUE(testing::throws_error([&] { merge_lora_folder(base, dir.path() / "adapter", out); },
                                    ErrorCode::kInvalidArgument, {"rank 2", "lora_A"}));
  adapter_with("model.layers.0.self_attn.q_proj", {2, 5}, config);  // in = 5, W has 4
  EXPECT_TRUE(testing::throws_error([&] { merge_lora_folder(base, dir.path() / "adapter", out); },
                                    ErrorCode::kInvalidArgument, {"model.layers.0.self_attn.q_proj", "[4, 4]"}));
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(testing::throws_error([&] { merge_lora_folder(base, dir.path(), out); }, ErrorCode::kInvalidArgument,
                                    {"not a PEFT adapter"}));
}

}  // namespace
}  // namespace reshard
