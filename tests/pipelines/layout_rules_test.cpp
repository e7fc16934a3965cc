// Layout rules: the first matching rule that fits a tensor's rank lays it out,
// else best effort over an axis where one is given, else replication;
// strictness makes a misfit an error naming tensor and rule.
#include "reshard/pipelines/layout_rules.h"

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

using testing::throws_error;

CheckpointLayout layout_with(std::vector<LayoutRule> rules, bool strict) {
  CheckpointLayout layout{Mesh({{"data", 2}, {"model", 4}}, {0, 1, 2, 3, 4, 5, 6, 7}), Topology::uniform(8, 1),
                          std::move(rules), std::nullopt};
  layout.strict = strict;
  return layout;
}

TEST(LayoutRules, ARuleLongerThanTheRankPassesToTheNextMatchingRuleThenReplication) {
  // docs/checkpoints.md's rule: every tensor's second dimension over "model".
  const CheckpointLayout broad = layout_with({{"*", PartitionSpec::parse("None,model")}}, false);
  EXPECT_EQ(broad.sharding_for("w", {8, 16}).spec(), PartitionSpec::parse("None,model"));
  EXPECT_EQ(broad.sharding_for("norm.weight", {16}).spec(), PartitionSpec());
  EXPECT_EQ(broad.sharding_for("step", {}).spec(), PartitionSpec());

  const CheckpointLayout two =
      layout_with({{"*", PartitionSpec::parse("None,model")}, {"*norm*", PartitionSpec::parse("model")}}, false);
  EXPECT_EQ(two.sharding_for("norm.weight", {16}).spec(), PartitionSpec::parse("model"));
  EXPECT_EQ(two.sharding_for("w", {8, 16}).spec(), PartitionSpec::parse("None,model"));
  // A fitting rule that does not divide is still an error: that is a layout mistake, not another rank.
  EXPECT_TRUE(throws_error([&] { two.sharding_for("w", {8, 6}); }, ErrorCode::kIndivisible, {"tensor 'w'"}));
}

TEST(LayoutRules, StrictMakesAMisfitAnErrorNamingTensorAndRule) {
  const CheckpointLayout strict = layout_with({{"*", PartitionSpec::parse("None,model")}}, true);
  EXPECT_EQ(strict.sharding_for("w", {8, 16}).spec(), PartitionSpec::parse("None,model"));
  EXPECT_TRUE(throws_error([&] { strict.sharding_for("transformer.norm.weight", {16}); }, ErrorCode::kRank,
                           {"tensor 'transformer.norm.weight'", "rule '*", "rank 1"}));
}

TEST(LayoutRules, BestEffortLaysOutWhatNoRuleMatches) {
  CheckpointLayout both = layout_with({{"*.w", PartitionSpec::parse("model")}}, false);
  both.best_effort_axis = "data";
  EXPECT_EQ(both.sharding_for("a.w", {8, 6}).spec(), PartitionSpec::parse("model"));
  // No rule: the last dimension "data" (2) divides.
  EXPECT_EQ(both.sharding_for("embed", {8, 6}).spec(), PartitionSpec::parse("None,data"));
  EXPECT_EQ(both.sharding_for("odd", {3, 5}).spec(), PartitionSpec());
  // A rule longer than the rank passes, to best effort.
  EXPECT_EQ(both.sharding_for("norm.w", {}).spec(), PartitionSpec());
  both.best_effort_axis = "nowhere";
  EXPECT_TRUE(throws_error([&] { both.sharding_for("embed", {8, 6}); }, ErrorCode::kUnknownAxis, {"tensor 'embed'"}));
  EXPECT_EQ(both.sharding_for("a.w", {8, 6}).spec(), PartitionSpec::parse("model"));
}

}  // namespace
}  // namespace reshard
