// Two-stage plans: a box crosses into a process once, then is copied to its other devices there.
#include <gtest/gtest.h>

#include "execute/support/rank_threads.h"
#include "execute/support/reference_arrays.h"
#include "reshard/execute/executor.h"
#include "reshard/execute/operations.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

// Devices 0, 1 on process 0 and 2, 3 on process 1; an [8, 6] f32 array split
// by rows over devices 0 and 2, to be replicated on all four devices.
class TwoStage : public ::testing::Test {
 protected:
  const Topology topology_ = Topology::uniform(4, 2);
  const Shape shape_{8, 6};
  const NamedSharding rows_{Mesh({{"x", 2}}, {0, 2}), PartitionSpec({{"x"}})};
  const NamedSharding everywhere_{Mesh({{"x", 4}}, {0, 1, 2, 3}), PartitionSpec()};
  const Box top_{{0, 0}, {4, 6}};
  const Box bottom_{{4, 0}, {4, 6}};

  // Stage 0 fills devices 0 and 2 (one half crossing each way); stage 1
  // copies device 0 to 1 and 2 to 3, in two boxes each.
  Plan fan_out_plan(DType dtype) const {
    return Plan(PlanKey{shape_, dtype, rows_, everywhere_, topology_},
                {{0, 0, top_, 0}, {2, 0, bottom_, 0}, {0, 2, top_, 0}, {2, 2, bottom_, 0},
                 {0, 1, top_, 1}, {0, 1, bottom_, 1}, {2, 3, bottom_, 1}, {2, 3, top_, 1}});
  }
};

TEST_F(TwoStage, EveryDeviceGetsTheBoxesThatCrossedOnce) {
  const Plan plan = fan_out_plan(DType::kF32);
  InProcessGroup group(2);
  std::vector<ExecuteStats> stats(2);
  testing::run_ranks(group, [&](Transport& t) {
    const ShardedArray src = testing::reference_array(shape_, DType::kF32, rows_, topology_, t.rank(), 5);
    ShardedArray dst = ShardedArray::allocate(shape_, DType::kF32, everywhere_, topology_, t.rank());
    stats[static_cast<size_t>(t.rank())] = execute(plan, src, dst, t);
    EXPECT_TRUE(testing::matches_reference(dst, 5));
  });
  const uint64_t half = 4 * 6 * 4;
  for (int p = 0; p < 2; ++p) {
    const ExecuteStats& s = stats[static_cast<size_t>(p)];
    EXPECT_EQ(s.bytes_sent, half);
    EXPECT_EQ(s.bytes_received, half);
    EXPECT_EQ(s.bytes_copied, half + 2 * half);  // its own half, then both halves to its second device
    EXPECT_EQ(group.transport(p).counters().bytes_sent, half);
    EXPECT_EQ(group.transport(p).counters().bytes_received, half);
  }
}

TEST_F(TwoStage, ABatchRunsEachArraysSecondStage) {
  // Two arrays of different dtypes in one operation, so both stages of both
  // run, and their halves share the messages between the two processes.
  const std::vector<Plan> plans{fan_out_plan(DType::kF32), fan_out_plan(DType::kU8)};
  InProcessGroup group(2);
  testing::run_ranks(group, [&](Transport& t) {
    const std::vector<ShardedArray> src{
        testing::reference_array(shape_, DType::kF32, rows_, topology_, t.rank(), 1),
        testing::reference_array(shape_, DType::kU8, rows_, topology_, t.rank(), 2)};
    std::vector<ShardedArray> dst{ShardedArray::allocate(shape_, DType::kF32, everywhere_, topology_, t.rank()),
                                  ShardedArray::allocate(shape_, DType::kU8, everywhere_, topology_, t.rank())};
    const ExecuteStats stats = execute(plans, src, dst, t);
    EXPECT_TRUE(testing::matches_reference(dst[0], 1));
    EXPECT_TRUE(testing::matches_reference(dst[1], 2));
    EXPECT_EQ(stats.messages_sent, 1u);
    EXPECT_EQ(stats.bytes_sent, 4u * 6 * (4 + 1));
  });
}

TEST_F(TwoStage, ABatchWithMismatchedListsIsRejected) {
  const std::vector<Plan> plans{fan_out_plan(DType::kF32)};
  testing::run_ranks(1, [&](Transport& t) {
    const std::vector<ShardedArray> src;
    std::vector<ShardedArray> dst;
    EXPECT_THROW(execute(plans, src, dst, t), Error);
  });
}

// The seed's request with the planner's own two-stage plan, threads as
// processes: 12 MiB cross, not 48, and every device holds the whole array.
TEST(TwoStagePlans, SeedReplicatedCaseSendsEachMissingByteIntoAProcessOnce) {
  const Shape shape{32, 8, 4096};
  const Topology topology = Topology::uniform(16, 4);
  const Mesh mesh({{"data", 4}, {"model", 4}}, {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15});
  const NamedSharding source(mesh, PartitionSpec::parse("data,None,model"));
  const NamedSharding replicated(mesh, PartitionSpec());
  InProcessGroup group(4);
  testing::run_ranks(group, [&](Transport& t) {
    const ShardedArray moved =
        reshard_array(testing::reference_array(shape, DType::kF32, source, topology, t.rank(), 9), replicated, t);
    EXPECT_EQ(moved.shards().size(), 4u);
    EXPECT_TRUE(testing::matches_reference(moved, 9));
  });
  uint64_t sent = 0, received = 0;
  for (int p = 0; p < 4; ++p) {
    sent += group.transport(p).counters().bytes_sent;
    received += group.transport(p).counters().bytes_received;
  }
  EXPECT_EQ(sent, uint64_t{12} << 20);
  EXPECT_EQ(received, uint64_t{12} << 20);
}

}  // namespace
}  // namespace reshard
