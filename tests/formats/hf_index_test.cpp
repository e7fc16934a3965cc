#include "reshard/formats/hf_index.h"

#include <string>

#include <gtest/gtest.h>

#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

constexpr std::string_view kLabel = "dir/model.safetensors.index.json";

// Parses `json` expecting kInvalidIndex; returns the message.
std::string index_error(const std::string& json) {
  try {
    parse_hf_index(json, kLabel);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), file_rule::kInvalidIndex) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << json;
  return "";
}

TEST(HfIndex, ParsesWeightMapAndTotals) {
  const HfIndex index = parse_hf_index(R"({
    "metadata": {"total_size": 28, "total_parameters": 7, "format": "pt"},
    "weight_map": {"b": "model-00002-of-00002.safetensors",
                   "a": "model-00001-of-00002.safetensors",
                   "c": "model-00001-of-00002.safetensors"}})",
                                       kLabel);
  EXPECT_EQ(index.weight_map.size(), 3u);
  EXPECT_EQ(index.weight_map.at("b"), "model-00002-of-00002.safetensors");
  EXPECT_EQ(index.total_size, 28u);
  EXPECT_EQ(index.total_parameters, 7u);
  EXPECT_EQ(index.file_names(), (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                                          "model-00002-of-00002.safetensors"}));
}

TEST(HfIndex, MetadataIsOptionalAndTotalsInformational) {
  const HfIndex bare = parse_hf_index(R"({"weight_map": {"a": "x.safetensors"}})", kLabel);
  EXPECT_FALSE(bare.total_size.has_value());
  // transformers never reads the totals, so odd values are not fatal.
  const HfIndex odd = parse_hf_index(
      R"({"metadata": {"total_size": 1.5e3, "total_parameters": "7"}, "weight_map": {}})", kLabel);
  EXPECT_FALSE(odd.total_size.has_value());
  EXPECT_FALSE(odd.total_parameters.has_value());
  EXPECT_TRUE(odd.weight_map.empty());
}

TEST(HfIndex, RefusesMalformedIndexes) {
  EXPECT_NE(index_error("{").find(kLabel), std::string::npos);
  EXPECT_NE(index_error("[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(index_error(R"({"metadata": {}})").find("weight_map"), std::string::npos);
  EXPECT_NE(index_error(R"({"weight_map": []})").find("weight_map"), std::string::npos);
  EXPECT_NE(index_error(R"({"weight_map": {}, "metadata": 3})").find("metadata"), std::string::npos);
  const std::string message = index_error(R"({"weight_map": {"w.0": 5}})");
  EXPECT_NE(message.find("w.0"), std::string::npos);
  // Invalid UTF-8 inside a string is not JSON.
  index_error("{\"weight_map\": {\"\xff\": \"a\"}}");
}

TEST(HfIndex, RefusesDeepNesting) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(index_error(deep).find("deeper"), std::string::npos);
}

TEST(HfIndex, RefusesFileNamesOutsideTheFolder) {
  for (const std::string bad : {"../model.safetensors", "sub/model.safetensors", "/etc/passwd",
                                "a\\\\b.safetensors", "..", ".", "", "x..y"}) {
    const std::string message =
        index_error(R"({"weight_map": {"layer.w": ")" + bad + R"("}})");
    EXPECT_NE(message.find("layer.w"), std::string::npos) << bad;
    EXPECT_NE(message.find(kLabel), std::string::npos) << bad;
  }
  index_error(R"({"weight_map": {"w": "a\u0000b"}})");
}

TEST(HfIndex, AcceptsPlainFileNames) {
  EXPECT_NO_THROW(check_shard_file_name("model-00001-of-00002.safetensors", "w", kLabel));
  EXPECT_NO_THROW(check_shard_file_name(".hidden.safetensors", "w", kLabel));
}

// Expected bytes from Python: json.dumps(index, indent=2, sort_keys=True) + "\n",
// which is how transformers' save_pretrained writes the index.
TEST(HfIndex, WritesExactlyAsTransformers) {
  HfIndex index;
  index.total_parameters = 7;
  index.total_size = 28;
  index.weight_map = {{"lm_head.weight", "model-00002-of-00002.safetensors"},
                      {"caf\xc3\xa9/\"q\"\\", "model-00001-of-00002.safetensors"},
                      {"tab\there\x01\x7f", "model-00002-of-00002.safetensors"},
                      {"\xf0\x9f\x98\x80", "model-00001-of-00002.safetensors"},
                      {"\xef\xbc\xa1", "model-00001-of-00002.safetensors"},
                      {"Z", "model-00001-of-00002.safetensors"}};
  const std::string expected =
      "{\n"
      "  \"metadata\": {\n"
      "    \"total_parameters\": 7,\n"
      "    \"total_size\": 28\n"
      "  },\n"
      "  \"weight_map\": {\n"
      "    \"Z\": \"model-00001-of-00002.safetensors\",\n"
      "    \"caf\\u00e9/\\\"q\\\"\\\\\": \"model-00001-of-00002.safetensors\",\n"
      "    \"lm_head.weight\": \"model-00002-of-00002.safetensors\",\n"
      "    \"tab\\there\\u0001\\u007f\": \"model-00002-of-00002.safetensors\",\n"
      "    \"\\uff21\": \"model-00001-of-00002.safetensors\",\n"
      "    \"\\ud83d\\ude00\": \"model-00001-of-00002.safetensors\"\n"
      "  }\n"
      "}\n";
  EXPECT_EQ(hf_index_json(index), expected);
}

TEST(HfIndex, WritesEmptyObjectsAsPython) {
  EXPECT_EQ(hf_index_json(HfIndex{}), "{\n  \"metadata\": {},\n  \"weight_map\": {}\n}\n");
}

TEST(HfIndex, WrittenIndexParsesBack) {
  HfIndex index;
  index.total_size = 123;
  index.total_parameters = 45;
  index.weight_map = {{"\xe5\xb1\x82.w", "model-00001-of-00001.safetensors"}};
  const HfIndex back = parse_hf_index(hf_index_json(index), kLabel);
  EXPECT_EQ(back.weight_map, index.weight_map);
  EXPECT_EQ(back.total_size, index.total_size);
  EXPECT_EQ(back.total_parameters, index.total_parameters);
}

}  // namespace
}  // namespace reshard
