// The map file: parsing, the checks against tensors, and the preset's shapes.
#include "reshard/pipelines/tensor_map.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "pipelines/support/levanter_specs.h"
#include "pipelines/tensor_map/tensor_map_resolve.h"
#include "reshard/layout/error.h"
#include "support/temp_dir.h"

namespace reshard {

using pipelines_detail::resolve_tensor_map;
using pipelines_detail::ResolvedMap;
using pipelines_detail::ResolvedTensor;
using pipelines_detail::ResolveOptions;

namespace {

using safetensors::TensorSpec;
using testing::throws_error;

TensorMap map_of(const std::string& rules) { return parse_tensor_map("{\"rules\": [" + rules + "]}", "test.json"); }

TEST(TensorMapParse, ReadsRulesAndWritesThemBack) {
  const TensorMap map = map_of(
      R"j({"from": "w.stacked.{p}", "to": "layers.{layer}.{p}", "rearrange": "layer (h d) e -> e (h d)",
          "sizes": {"d": 4}, "dtype": "bf16", "optional": true})j");
  ASSERT_EQ(map.rules.size(), 1u);
  const TensorMapRule& rule = map.rules[0];
  EXPECT_EQ(rule.unstack_axis(), "layer");
  EXPECT_EQ(rule.stack_axis(), std::nullopt);
  EXPECT_EQ(rule.from_axes, (AxisGroups{{"layer"}, {"h", "d"}, {"e"}}));
  EXPECT_EQ(rule.to_axes, (AxisGroups{{"e"}, {"h", "d"}}));
  EXPECT_EQ(rule.dtype, DType::kBF16);
  EXPECT_TRUE(rule.optional);
  const TensorMap again = parse_tensor_map(tensor_map_json(map), "again");
  EXPECT_EQ(tensor_map_json(again), tensor_map_json(map));
}

TEST(TensorMapParse, InverseSwapsSidesAndStacks) {
  const TensorMap inverse = inverse_tensor_map(
      map_of(R"j({"from": "w.stacked", "to": "layers.{layer}.w", "rearrange": "layer a b -> b a", "dtype": "f16"})j"));
  const TensorMapRule& rule = inverse.rules[0];
  EXPECT_EQ(rule.from, "layers.{layer}.w");
  EXPECT_EQ(rule.stack_axis(), "layer");
  EXPECT_EQ(rule.unstack_axis(), std::nullopt);
  EXPECT_EQ(rule.dtype, std::nullopt);
}

TEST(TensorMapParse, RefusesMalformedRules) {
  EXPECT_TRUE(throws_error([] { parse_tensor_map("{", "m.json"); }, ErrorCode::kInvalidConfig, {"m.json", "JSON"}));
  EXPECT_TRUE(throws_error([] { map_of(R"j({"from": "a", "to": "b", "rename": 1})j"); }, ErrorCode::kInvalidConfig,
                           {"rule 0", "unknown key 'rename'"}));
  EXPECT_TRUE(throws_error([] { map_of(R"j({"from": "a", "to": "b{i}", "rearrange": "i x -> x"}, {"from": "c"})j"); },
                           ErrorCode::kInvalidConfig, {"rule 1", "'to'"}));
  // Unstacking needs the index in the output name, or every layer would get one name.
  EXPECT_TRUE(throws_error([] { map_of(R"j({"from": "a", "to": "b", "rearrange": "i x -> x"})j"); }, ErrorCode::kInvalidConfig,
                           {"rule 0", "{i}"}));
  EXPECT_TRUE(throws_error([] { map_of(R"j({"from": "a", "to": "b.{i}", "rearrange": "i x -> y"})j"); },
                           ErrorCode::kInvalidConfig, {"at most one axis"}));
  EXPECT_TRUE(throws_error([] { map_of(R"j({"from": "a", "to": "b.{i}", "rearrange": "(i x) -> x"})j"); },
                           ErrorCode::kInvalidConfig, {"dimension of its own"}));
  EXPECT_TRUE(throws_error([] { map_of(R"j({"from": "a.{p}", "to": "b", "rearrange": "x -> x"})j"); },
                           ErrorCode::kInvalidConfig, {"same placeholders"}));
  EXPECT_TRUE(throws_error([] { map_of(R"j({"from": "a", "to": "b", "rearrange": "x x -> x"})j"); }, ErrorCode::kInvalidConfig,
                           {"twice"}));
  EXPECT_TRUE(throws_error([] { map_of(R"j({"from": "a", "to": "b", "dtype": "i32"})j"); }, ErrorCode::kInvalidConfig,
                           {"f32, f16 or bf16"}));
  EXPECT_TRUE(throws_error([] { map_of(R"j({"from": "a{", "to": "b"})j"); }, ErrorCode::kInvalidConfig, {"'{' without"}));
}

TEST(TensorMapResolve, NamesTheTensorAndRuleThatDoNotFit) {
  const TensorMap split = map_of(R"j({"from": "q", "to": "out.q", "rearrange": "(h d) e -> e h d", "sizes": {"d": 3}})j");
  const std::vector<TensorSpec> q = {{"q", DType::kF32, {8, 2}}};
  EXPECT_TRUE(throws_error([&] { resolve_tensor_map(split, q); }, ErrorCode::kIndivisible,
                           {"tensor 'q'", "rule 0", "does not factor"}));
  const std::vector<TensorSpec> flat = {{"q", DType::kF32, {8}}};
  EXPECT_TRUE(throws_error([&] { resolve_tensor_map(split, flat); }, ErrorCode::kRank, {"tensor 'q'", "rule 0"}));
  const TensorMap two_unknown = map_of(R"j({"from": "q", "to": "q2", "rearrange": "(h d) -> h d"})j");
  EXPECT_TRUE(throws_error([&] { resolve_tensor_map(two_unknown, flat); }, ErrorCode::kInvalidArgument,
                           {"tensor 'q'", "give the sizes"}));

  const TensorMap unused = map_of(R"j({"from": "q", "to": "q"}, {"from": "lm_head", "to": "lm_head"})j");
  EXPECT_TRUE(throws_error([&] { resolve_tensor_map(unused, q); }, ErrorCode::kMissingTensor,
                           {"rule 1 ('lm_head')", "matches no tensor"}));
  ResolveOptions lenient;
  lenient.allow_unused_rules = true;
  EXPECT_EQ(resolve_tensor_map(unused, q, lenient).outputs.size(), 1u);

  EXPECT_TRUE(throws_error([&] { map_of(R"j({"from": "a.{x}", "to": "out"})j"); }, ErrorCode::kInvalidConfig));
  const TensorMap collide = map_of(R"j({"from": "a", "to": "out"}, {"from": "b", "to": "out"})j");
  const std::vector<TensorSpec> ab = {{"a", DType::kF32, {1}}, {"b", DType::kF32, {1}}};
  EXPECT_TRUE(throws_error([&] { resolve_tensor_map(collide, ab); }, ErrorCode::kDuplicateTensor,
                           {"'out'", "tensor 'a' (rule 0)", "tensor 'b' (rule 1)"}));

  const TensorMap only_a = map_of(R"j({"from": "a", "to": "a"})j");
  EXPECT_TRUE(throws_error([&] { resolve_tensor_map(only_a, ab); }, ErrorCode::kInvalidArgument,
                           {"tensor 'b'", "no rule"}));
  lenient.skip_unmatched = true;
  EXPECT_EQ(resolve_tensor_map(only_a, ab, lenient).outputs.size(), 1u);
}

TEST(TensorMapResolve, StackingNeedsEveryIndex) {
  const TensorMap stack = map_of(R"j({"from": "l.{layer}.w", "to": "w", "rearrange": "a -> layer a"})j");
  const std::vector<TensorSpec> gap = {{"l.0.w", DType::kF32, {2}}, {"l.2.w", DType::kF32, {2}}};
  EXPECT_TRUE(throws_error([&] { resolve_tensor_map(stack, gap); }, ErrorCode::kMissingTensor, {"index 1"}));
  const std::vector<TensorSpec> uneven = {{"l.0.w", DType::kF32, {2}}, {"l.1.w", DType::kF32, {3}}};
  EXPECT_TRUE(throws_error([&] { resolve_tensor_map(stack, uneven); }, ErrorCode::kInvalidArgument,
                           {"cannot be stacked"}));
  const std::vector<TensorSpec> good = {{"l.1.w", DType::kF32, {2}}, {"l.0.w", DType::kF32, {2}}};
  // A known size of the stack axis catches missing last indices, and indices past it.
  ResolveOptions three_layers;
  three_layers.sizes["layer"] = 3;
  EXPECT_TRUE(throws_error([&] { resolve_tensor_map(stack, good, three_layers); }, ErrorCode::kMissingTensor,
                           {"index 2", "rule 0"}));
  ResolveOptions one_layer;
  one_layer.sizes["layer"] = 1;
  EXPECT_TRUE(throws_error([&] { resolve_tensor_map(stack, good, one_layer); }, ErrorCode::kInvalidArgument,
                           {"tensor 'l.1.w'", "index 1", "size is 1"}));
  const ResolvedMap resolved = resolve_tensor_map(stack, good);
  ASSERT_EQ(resolved.outputs.size(), 1u);
  EXPECT_EQ(resolved.outputs[0].out.shape, (safetensors::Dims{2, 2}));
  ASSERT_EQ(resolved.outputs[0].regions.size(), 2u);
  EXPECT_EQ(resolved.outputs[0].regions[0].source, 1u);  // index 0 comes from "l.0.w"
  EXPECT_EQ(resolved.outputs[0].regions[0].out_box, Box({0, 0}, {1, 2}));
}

TEST(TensorMapResolve, CastsOnlyFloatingTensors) {
  const TensorMap map = map_of(R"j({"from": "{n}", "to": "{n}"})j");
  const std::vector<TensorSpec> tensors = {{"f", DType::kF32, {2}}, {"i", DType::kI32, {2}}, {"b", DType::kBool, {2}}};
  ResolveOptions options;
  options.dtype = DType::kBF16;
  const ResolvedMap resolved = resolve_tensor_map(map, tensors, options);
  EXPECT_EQ(resolved.outputs[0].out.dtype, DType::kBF16);
  EXPECT_EQ(resolved.outputs[1].out.dtype, DType::kI32);
  EXPECT_EQ(resolved.outputs[2].out.dtype, DType::kBool);
}

// The sizes the shapes below are asserted with.
std::vector<TensorSpec> levanter_tensors() {
  return testing::levanter_specs(
      {.layers = 2, .kv_heads = 2, .q_per_group = 2, .head_dim = 2, .embed = 8, .mlp = 12, .vocab = 10, .r = 3});
}

TEST(TensorMapPreset, LevanterLlamaGivesHuggingFaceNamesAndShapes) {
  const std::optional<TensorMap> map = tensor_map_preset("levanter-llama");
  ASSERT_TRUE(map);
  const ResolvedMap resolved = resolve_tensor_map(*map, levanter_tensors());
  const auto shape_of = [&](const std::string& name) {
    const ResolvedTensor* tensor = resolved.find(name);
    return tensor ? safetensors::layout_shape(tensor->out) : Shape{-1};
  };
  EXPECT_EQ(shape_of("model.embed_tokens.weight"), (Shape{10, 8}));
  EXPECT_EQ(shape_of("model.layers.1.self_attn.q_proj.weight"), (Shape{8, 8}));
  EXPECT_EQ(shape_of("model.layers.0.self_attn.k_proj.weight"), (Shape{4, 8}));
  EXPECT_EQ(shape_of("model.layers.0.self_attn.o_proj.weight"), (Shape{8, 8}));
  EXPECT_EQ(shape_of("model.layers.1.mlp.down_proj.weight"), (Shape{8, 12}));
  EXPECT_EQ(shape_of("model.layers.1.post_attention_layernorm.weight"), (Shape{8}));
  EXPECT_EQ(shape_of("model.norm.weight"), (Shape{8}));
  EXPECT_EQ(shape_of("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"), (Shape{3, 8}));
  EXPECT_EQ(shape_of("base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight"), (Shape{8, 3}));
  EXPECT_EQ(shape_of("base_model.model.model.layers.0.self_attn.o_proj.lora_A.weight"), (Shape{3, 8}));
  EXPECT_EQ(resolved.outputs.size(), 3u + 9u * 2u + 4u * 2u);
  // Source order, layers in index order.
  EXPECT_EQ(resolved.outputs[0].out.name, "model.embed_tokens.weight");
  EXPECT_EQ(resolved.outputs[1].out.name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(resolved.outputs[2].out.name, "model.layers.1.self_attn.q_proj.weight");
}

TEST(TensorMapPreset, ImportNeedsTheHeadSizesFromConfig) {
  const TensorMap map = *tensor_map_preset("levanter-llama");
  const ResolvedMap exported = resolve_tensor_map(map, levanter_tensors());
  const TensorMap back = inverse_tensor_map(map);
  const std::vector<TensorSpec> hf = exported.output_specs();
  EXPECT_TRUE(throws_error([&] { resolve_tensor_map(back, hf); }, ErrorCode::kInvalidArgument, {"give the sizes"}));
  ResolveOptions options;
  options.sizes = llama_axis_sizes_from_config(
      R"j({"hidden_size": 8, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 12})j", "config");
  EXPECT_EQ(options.sizes.at("head_dim"), 2);
  EXPECT_EQ(options.sizes.at("q_per_group"), 2);
  const ResolvedMap imported = resolve_tensor_map(back, hf, options);
  const std::vector<TensorSpec> original = levanter_tensors();
  ASSERT_EQ(imported.outputs.size(), original.size());
  for (const TensorSpec& spec : original) {
    const ResolvedTensor* tensor = imported.find(spec.name);
    ASSERT_NE(tensor, nullptr) << spec.name;
    EXPECT_EQ(tensor->out, spec);
  }
}

TEST(TensorMapPreset, UnknownNamesAreNotPresets) {
  EXPECT_FALSE(tensor_map_preset("levanter-gpt"));
  EXPECT_EQ(tensor_map_preset_names(), std::vector<std::string>{"levanter-llama"});
  EXPECT_NE(tensor_map_help().find("levanter-llama"), std::string::npos);
  EXPECT_TRUE(throws_error([] { load_tensor_map("/nonexistent/map.json"); }, ErrorCode::kIo, {"map.json"}));
  // A mistyped preset name lists the presets rather than failing to read a file of that name.
  EXPECT_TRUE(throws_error([] { load_tensor_map("levanter-lama"); }, ErrorCode::kInvalidArgument,
                           {"unknown preset 'levanter-lama'", "presets: levanter-llama"}));
}

// The same bad map is the same error from a file and from text (Python's
// map='{...}'): kInvalidConfig, whatever part of it is wrong.
TEST(TensorMapErrors, AreOneCodeFromAFileAndFromText) {
  const testing::TempDir dir;
  for (const std::string& text : {std::string("{"), std::string(R"j({"rules": [{"from": "a", "to": "b", "dtype": "i32"}]})j"),
                                 std::string(R"j({"rules": [{"from": "a{", "to": "b"}]})j")}) {
    const std::filesystem::path file = dir.path() / "map.json";
    std::ofstream(file) << text;
    ErrorCode from_file = ErrorCode::kInvalidArgument, from_text = ErrorCode::kInvalidArgument;
    try {
      load_tensor_map(file.string());
    } catch (const Error& e) {
      from_file = e.code();
    }
    try {
      parse_tensor_map(text, "map");
    } catch (const Error& e) {
      from_text = e.code();
    }
    EXPECT_EQ(from_file, ErrorCode::kInvalidConfig) << text;
    EXPECT_EQ(from_text, ErrorCode::kInvalidConfig) << text;
  }
}

}  // namespace
}  // namespace reshard
