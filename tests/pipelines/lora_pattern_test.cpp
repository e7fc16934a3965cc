// The regex subset of rank_pattern / alpha_pattern keys, as Python's re reads them.
#include "pipelines/lora/lora_pattern.h"

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "reshard/layout/error.h"

namespace reshard {

using pipelines_detail::regex_full_match;

namespace {

TEST(LoraPattern, MatchesAsPythonsReFullmatch) {
  EXPECT_TRUE(regex_full_match("q_proj", "q_proj"));
  EXPECT_FALSE(regex_full_match("q_proj", "q_proj2"));
  EXPECT_TRUE(regex_full_match("(.*\\.)?(q_proj)", "model.layers.0.self_attn.q_proj"));
  EXPECT_FALSE(regex_full_match("(.*\\.)?(q_proj)", "model.layers.0.self_attn.xq_proj"));
  EXPECT_TRUE(regex_full_match("layers\\.1\\..*", "layers.1.self_attn.v_proj"));
  EXPECT_FALSE(regex_full_match("layers\\.1\\..*", "layers.11.self_attn.v_proj"));
  EXPECT_TRUE(regex_full_match("layers\\.1.\\..*", "layers.11.self_attn.v_proj"));
  EXPECT_TRUE(regex_full_match("model\\.layers\\.\\d+\\.mlp\\.(up|down)_proj", "model.layers.12.mlp.down_proj"));
  EXPECT_FALSE(regex_full_match("model\\.layers\\.\\d+\\.mlp\\.(up|down)_proj", "model.layers.12.mlp.gate_proj"));
  EXPECT_TRUE(regex_full_match("a|b", "b"));
  EXPECT_TRUE(regex_full_match("[a-c_]{2,3}x", "a_x"));
  EXPECT_FALSE(regex_full_match("[a-c_]{2,3}x", "a_bcx"));
  EXPECT_TRUE(regex_full_match("[^.]+\\.v", "abc.v"));
  EXPECT_FALSE(regex_full_match("[^.]+\\.v", "a.b.v"));
  EXPECT_TRUE(regex_full_match("(?:ab)*c?", "ababab"));
  EXPECT_TRUE(regex_full_match("^x$", "x"));
  EXPECT_TRUE(regex_full_match("\\w+\\s\\W", "ab_1 ."));
}

TEST(LoraPattern, UnsupportedSyntaxIsAnErrorNamingThePattern) {
  for (const char* bad : {"(", "a)", "[ab", "*a", "a{2", "\\1", "(?P<x>a)", "a*?", "a\\"}) {
    EXPECT_TRUE(testing::throws_error([&] { regex_full_match(bad, "a"); }, ErrorCode::kParse, {bad})) << bad;
  }
  EXPECT_TRUE(testing::throws_error([] { regex_full_match("(a*)*b", std::string(60, 'a')); }, ErrorCode::kParse,
                                    {"too long"}));
}

}  // namespace
}  // namespace reshard
