// Spotting the arrays of a batch that repeat an earlier key.
#include "plan/repeated_keys.h"

#include <gtest/gtest.h>

#include "plan/support/layouts.h"

namespace reshard {
namespace {

using testing::sharding;

PlanKey key_of(Shape shape, NamedSharding src, NamedSharding dst, DType dtype = DType::kF32) {
  return PlanKey{std::move(shape), dtype, std::move(src), std::move(dst), Topology::uniform(8, 2)};
}

TEST(RepeatedKeys, FindsTheFirstArrayOfAnEqualKey) {
  const PlanKey key = key_of({8, 4}, sharding("x=4,y=2", {}, "x,y"), sharding("z=8", {}, "z"));
  const PlanKey copy = key;
  const PlanKey other = key_of({8, 4}, sharding("x=4,y=2", {}, "y,x"), sharding("z=8", {}, "z"));
  plan_detail::RepeatedKeys repeated;
  EXPECT_EQ(repeated.first_of(key, 0), std::nullopt);
  EXPECT_EQ(repeated.first_of(other, 1), std::nullopt);
  EXPECT_EQ(repeated.first_of(copy, 2), 0u);
  EXPECT_EQ(repeated.first_of(other, 3), 1u);
}

TEST(RepeatedKeys, TrailingNonesAreTheSameSpec) {
  // PartitionSpec's == ignores them, so the hash must too.
  const PlanKey key = key_of({8, 4}, sharding("x=4,y=2", {}, "x"), sharding("z=8", {}, "z"));
  const PlanKey padded = key_of({8, 4}, sharding("x=4,y=2", {}, "x,None"), sharding("z=8", {}, "z,None"));
  ASSERT_EQ(key, padded);
  plan_detail::RepeatedKeys repeated;
  EXPECT_EQ(repeated.first_of(key, 0), std::nullopt);
  EXPECT_EQ(repeated.first_of(padded, 1), 0u);
}

TEST(RepeatedKeys, EveryFieldTellsKeysApart) {
  const PlanKey key = key_of({8, 4}, sharding("x=4,y=2", {}, "x"), sharding("z=8", {}, "z"));
  std::vector<PlanKey> others(6, key);
  others[0].shape = {4, 8};
  others[1].dtype = DType::kBF16;
  others[2].src = sharding("x=4,y=2", {7, 6, 5, 4, 3, 2, 1, 0}, "x");
  others[3].dst = key.dst.with_memory_kind(MemoryKind::kPinnedHost);
  others[4].src = sharding("x=4,y=2", {}, "y");  // entries of the same sizes, other names
  others[5].topology = Topology::uniform(8, 4);
  plan_detail::RepeatedKeys repeated;
  EXPECT_EQ(repeated.first_of(key, 0), std::nullopt);
  for (size_t i = 0; i < others.size(); ++i) EXPECT_EQ(repeated.first_of(others[i], i + 1), std::nullopt) << i;
}

}  // namespace
}  // namespace reshard
