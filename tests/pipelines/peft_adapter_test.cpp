// PEFT adapter folders: the config as PEFT writes it, per-module rank and
// alpha, the adapter-key check, and the folder itself.
#include "reshard/pipelines/peft_adapter.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "pipelines/lora/peft_keys.h"
#include "pipelines/support/lora_test_files.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/lora_config.h"

namespace reshard {
namespace {

using testing::throws_error;

LoraConfig example_config() {
  LoraConfig config;
  config.r = 8;
  config.lora_alpha = 16;
  config.lora_dropout = 0.05;
  config.target_modules = {"v_proj", "q_proj"};
  config.base_model_name_or_path = "meta-llama/Llama-2-7b-hf";
  config.rank_pattern = {{"q_proj", 4}};
  config.alpha_pattern = {{"layers\\.0\\..*", 32.5}};
  return config;
}

// What python's json.dumps(config, indent=2, sort_keys=True) gives for it.
constexpr std::string_view kExampleJson = R"j({
  "alpha_pattern": {
    "layers\\.0\\..*": 32.5
  },
  "base_model_name_or_path": "meta-llama/Llama-2-7b-hf",
  "bias": "none",
  "fan_in_fan_out": false,
  "inference_mode": true,
  "lora_alpha": 16,
  "lora_bias": false,
  "lora_dropout": 0.05,
  "modules_to_save": null,
  "peft_type": "LORA",
  "r": 8,
  "rank_pattern": {
    "q_proj": 4
  },
  "target_modules": [
    "q_proj",
    "v_proj"
  ],
  "task_type": "CAUSAL_LM",
  "use_dora": false,
  "use_rslora": false
})j";

TEST(LoraConfig, WrittenAsPeftWritesIt) {
  EXPECT_EQ(lora_config_json(example_config()), kExampleJson);
  LoraConfig plain;
  plain.target_modules = {"q_proj"};
  const std::string json = lora_config_json(plain);
  EXPECT_NE(json.find("\"alpha_pattern\": {},"), std::string::npos) << json;
  EXPECT_NE(json.find("\"lora_dropout\": 0.0,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"base_model_name_or_path\": null,"), std::string::npos) << json;
}

TEST(LoraConfig, ReadsBackWhatItWrites) {
  const LoraConfig config = parse_lora_config(kExampleJson, "adapter_config.json");
  EXPECT_EQ(config.r, 8);
  EXPECT_EQ(config.lora_alpha, 16);
  EXPECT_EQ(config.target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(config.rank_pattern, (std::vector<std::pair<std::string, int64_t>>{{"q_proj", 4}}));
  EXPECT_EQ(lora_config_json(config), kExampleJson);
}

TEST(LoraConfig, RefusesOtherAdaptersAndBadFields) {
  EXPECT_TRUE(throws_error([] { parse_lora_config(R"({"peft_type": "IA3"})", "cfg.json"); }, ErrorCode::kUnsupported,
                           {"cfg.json", "peft_type 'IA3'"}));
  EXPECT_TRUE(throws_error([] { parse_lora_config(R"({"r": 8})", "cfg.json"); }, ErrorCode::kInvalidConfig,
                           {"cfg.json", "peft_type"}));
  EXPECT_TRUE(throws_error([] { parse_lora_config(R"({"peft_type": "LORA", "modules_to_save": "lm_head"})", "c"); },
                           ErrorCode::kInvalidConfig, {"modules_to_save"}));
  EXPECT_TRUE(throws_error([] { parse_lora_config(R"({"peft_type": "LORA", "r": "8"})", "cfg.json"); },
                           ErrorCode::kInvalidConfig, {"'r'"}));
  EXPECT_TRUE(throws_error([] { parse_lora_config(R"({"peft_type": "LORA", "rank_pattern": {"q": 1.5}})", "c"); },
                           ErrorCode::kInvalidConfig, {"rank_pattern"}));
  EXPECT_TRUE(throws_error([] { parse_lora_config("[", "c"); }, ErrorCode::kInvalidConfig, {"JSON"}));
}

TEST(LoraConfig, PatternsMatchTheEndOfTheModuleNameFirstKeyFirst) {
  LoraConfig config;
  config.r = 8;
  config.lora_alpha = 16;
  config.rank_pattern = {{"q_proj", 4}, {"layers\\.1\\.self_attn\\.q_proj", 2}};
  config.alpha_pattern = {{"layers\\.1\\..*", 4}};
  const ModuleLora q0 = module_lora(config, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(q0.r, 4);
  EXPECT_EQ(q0.alpha, 16);
  EXPECT_EQ(q0.scaling, 4.0f);
  // The first key that matches wins, even where a later one is more specific.
  const ModuleLora q1 = module_lora(config, "model.layers.1.self_attn.q_proj");
  EXPECT_EQ(q1.r, 4);
  EXPECT_EQ(q1.alpha, 4);
  // "q_proj" must be a whole last part: "xq_proj" does not match.
  EXPECT_EQ(module_lora(config, "model.layers.0.self_attn.xq_proj").r, 8);
  EXPECT_EQ(module_lora(config, "q_proj").r, 4);
  config.use_rslora = true;
  EXPECT_EQ(module_lora(config, "model.layers.0.mlp.up_proj").scaling, static_cast<float>(16.0 / std::sqrt(8.0)));
  config.rank_pattern = {{"(", 1}};
  EXPECT_TRUE(throws_error([&] { module_lora(config, "m"); }, ErrorCode::kInvalidConfig, {"rank_pattern", "'('"}));
}

TEST(PeftAdapterKeys, ParseAndName) {
  const auto key = parse_adapter_key("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
  ASSERT_TRUE(key);
  EXPECT_EQ(key->module, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(key->factor, AdapterKey::Factor::kB);
  EXPECT_EQ(adapter_key(key->module, key->factor), "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
  EXPECT_FALSE(parse_adapter_key("model.layers.0.self_attn.q_proj.lora_A.weight"));
  EXPECT_FALSE(parse_adapter_key("base_model.model.lm_head.weight"));
  const std::vector<std::string> keys = {"base_model.model.a.v_proj.lora_A.weight",
                                         "base_model.model.b.q_proj.lora_B.weight"};
  EXPECT_EQ(target_modules_of(keys), (std::vector<std::string>{"q_proj", "v_proj"}));
}

// Every name PEFT's save_pretrained gives a LoRA adapter's tensors (the adapter
// name removed), and the base tensor a whole copy replaces.
TEST(PeftAdapterKeys, EveryKindPeftSaves) {
  using pipelines_detail::PeftKey;
  using pipelines_detail::parse_peft_key;
  const std::string q = "model.layers.0.self_attn.q_proj";
  const struct {
    std::string rest;
    PeftKey::Kind kind;
    std::string module;
    bool embedding;
  } factors[] = {{q + ".lora_A.weight", PeftKey::Kind::kA, q, false},
                 {q + ".lora_B.weight", PeftKey::Kind::kB, q, false},
                 {q + ".lora_B.bias", PeftKey::Kind::kBBias, q, false},
                 {q + ".lora_magnitude_vector", PeftKey::Kind::kMagnitude, q, false},
                 {"model.embed_tokens.lora_embedding_A", PeftKey::Kind::kA, "model.embed_tokens", true},
                 {"model.embed_tokens.lora_embedding_B", PeftKey::Kind::kB, "model.embed_tokens", true}};
  for (const auto& f : factors) {
    const std::optional<PeftKey> key = parse_peft_key("base_model.model." + f.rest);
    ASSERT_TRUE(key) << f.rest;
    EXPECT_EQ(key->kind, f.kind) << f.rest;
    EXPECT_EQ(key->module, f.module) << f.rest;
    EXPECT_EQ(key->embedding, f.embedding) << f.rest;
  }
  const struct {
    std::string rest, tensor, module;
    bool base_layer;
  } wholes[] = {{"lm_head.weight", "lm_head.weight", "lm_head", false},
                {"score.modules_to_save.default.weight", "score.weight", "score", false},
                {"model.embed_tokens.base_layer.weight", "model.embed_tokens.weight", "model.embed_tokens", true},
                {q + ".lora_E", q + ".lora_E", q, false}};
  for (const auto& w : wholes) {
    const std::optional<PeftKey> key = parse_peft_key("base_model.model." + w.rest);
    ASSERT_TRUE(key) << w.rest;
    EXPECT_EQ(key->kind, PeftKey::Kind::kWhole) << w.rest;
    EXPECT_EQ(key->tensor, w.tensor) << w.rest;
    EXPECT_EQ(key->module, w.module) << w.rest;
    EXPECT_EQ(key->base_layer, w.base_layer) << w.rest;
  }
  EXPECT_FALSE(parse_peft_key("model.layers.0.self_attn.q_proj.lora_A.weight"));
  EXPECT_FALSE(parse_peft_key("base_model.model."));
}

TEST(PeftAdapterKeys, AKeyNamingNoBaseModuleIsAnErrorNamingIt) {
  const auto base_has = [](std::string_view name) { return name == "model.layers.0.self_attn.q_proj.weight"; };
  const std::vector<std::string> good = {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"};
  EXPECT_NO_THROW(check_adapter_keys(good, base_has, "base/"));
  // The prefix mistake: the framework's path without "model.".
  const std::vector<std::string> prefix = {"base_model.model.layers.0.self_attn.q_proj.lora_A.weight"};
  EXPECT_TRUE(throws_error([&] { check_adapter_keys(prefix, base_has, "base/"); }, ErrorCode::kMissingTensor,
                           {"'base_model.model.layers.0.self_attn.q_proj.lora_A.weight'", "base/",
                            "'model.layers.0.self_attn.q_proj'"}));
  const std::vector<std::string> other = {"base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector"};
  EXPECT_TRUE(throws_error([&] { check_adapter_keys(other, base_has, "base/"); }, ErrorCode::kUnsupported,
                           {"lora_magnitude_vector"}));
}

TEST(PeftAdapterFolder, WritesTheWeightsAndTheConfig) {
  testing::TempDir dir;
  const std::vector<float> a = {1, 2, 3, 4}, b = {5, 6};
  const std::vector<safetensors::TensorSpec> specs = {
      {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", DType::kF32, {2, 2}},
      {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", DType::kF32, {1, 2}}};
  LoraConfig config;
  config.r = 2;
  config.target_modules = target_modules_of(std::vector<std::string>{specs[0].name, specs[1].name});
  const auto produce = [&](const safetensors::TensorInfo& tensor, const ByteSink& sink) {
    const std::vector<float>& values = tensor.name.ends_with("lora_A.weight") ? a : b;
    sink(std::as_bytes(std::span(values)));
  };
  const auto folder = dir.path() / "adapter";
  const WritePeftAdapterResult written = write_peft_adapter(config, specs, produce, folder);
  EXPECT_EQ(written.files, 2u);
  EXPECT_EQ(written.tensors, 2u);
  EXPECT_EQ(written.bytes, (a.size() + b.size()) * sizeof(float));
  const HfFolder opened = HfFolder::open(folder);
  EXPECT_EQ(opened.kind, HfFolderKind::kPeftAdapter);
  const auto& file = opened.catalog.files()[0];
  EXPECT_EQ(file.metadata(), safetensors::default_metadata());
  std::vector<float> read(4);
  file.read(file.tensor(specs[0].name), std::as_writable_bytes(std::span(read)));
  EXPECT_EQ(read, a);
  EXPECT_EQ(testing::read_text(folder / "adapter_config.json"), lora_config_json(config));
  // The default refuses a folder that holds an adapter; replace overwrites it.
  EXPECT_TRUE(throws_error([&] { write_peft_adapter(config, specs, produce, folder); }, ErrorCode::kAlreadyExists,
                           {"adapter"}));
  WritePeftAdapterOptions replacing;
  replacing.replace = true;
  EXPECT_NO_THROW(write_peft_adapter(config, specs, produce, folder, replacing));
}

}  // namespace
}  // namespace reshard
