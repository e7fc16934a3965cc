// The operations plan through default_plan_cache(): the same move twice plans once.
#include <gtest/gtest.h>

#include "execute/support/reference_arrays.h"
#include "reshard/execute/in_process_transport.h"
#include "reshard/execute/operations.h"
#include "reshard/plan/plan_cache.h"

namespace reshard {
namespace {

TEST(DefaultPlanCache, RepeatedReshardsBetweenTheSameLayoutsPlanOnce) {
  const Topology one = Topology::uniform(4, 1);
  const NamedSharding rows(Mesh({{"x", 4}}, {0, 1, 2, 3}), PartitionSpec({{"x"}}));
  const NamedSharding columns(Mesh({{"x", 4}}, {3, 1, 2, 0}), PartitionSpec({{}, {"x"}}));
  const Shape shape{8, 8};
  PlanCache& cache = default_plan_cache();
  cache.clear();
  InProcessGroup group(1);
  const ShardedArray a = testing::reference_array(shape, DType::kF32, rows, one, 0, 4);
  EXPECT_TRUE(testing::matches_reference(reshard_array(a, columns, group.transport(0)), 4));
  ASSERT_EQ(cache.size(), 1u) << "the operation did not plan through the default cache";
  const auto planned = cache.get(PlanKey{shape, DType::kF32, rows, columns, one});
  EXPECT_EQ(cache.size(), 1u) << "the key the operation stored is not the move's";
  EXPECT_TRUE(testing::matches_reference(reshard_array(a, columns, group.transport(0)), 4));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.get(PlanKey{shape, DType::kF32, rows, columns, one}).get(), planned.get())
      << "the second reshard planned again";
}

}  // namespace
}  // namespace reshard
