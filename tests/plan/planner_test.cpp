// The planner on small cases checked by hand, the seed scenario, and its errors.
#include "reshard/plan/planner.h"

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "plan/support/layouts.h"

namespace reshard {
namespace {

using testing::sharding;
using testing::throws_error;

Box box(std::vector<int64_t> origin, Shape shape) { return Box(std::move(origin), std::move(shape)); }

PlanKey key_of(Shape shape, NamedSharding src, NamedSharding dst, Topology topology, DType dtype = DType::kF32) {
  return PlanKey{std::move(shape), dtype, std::move(src), std::move(dst), std::move(topology)};
}

std::vector<Transfer> planned(const PlanKey& key) {
  Plan plan = make_plan(key);
  plan.validate();
  return plan.transfers();
}

TEST(Planner, FollowsADifferentDeviceOrder) {
  const PlanKey key = key_of({4}, sharding("x=2", {0, 1}, "x"), sharding("y=2", {1, 0}, "y"), Topology::uniform(2, 1));
  EXPECT_EQ(planned(key), (std::vector<Transfer>{{0, 1, box({0}, {2})}, {1, 0, box({2}, {2})}}));
}

TEST(Planner, TakesFromTheTargetDeviceItselfFirst) {
  const PlanKey key =
      key_of({8}, sharding("x=4", {}, ""), sharding("y=4", {3, 2, 1, 0}, "y"), Topology::uniform(4, 1));
  const Plan plan = make_plan(key);
  EXPECT_EQ(plan.transfers(), (std::vector<Transfer>{{3, 3, box({0}, {2})},
                                                     {2, 2, box({2}, {2})},
                                                     {1, 1, box({4}, {2})},
                                                     {0, 0, box({6}, {2})}}));
  EXPECT_EQ(plan.stats().bytes_same_device, 32u);
  EXPECT_EQ(plan.stats().bytes_total, 32u);
}

TEST(Planner, TakesFromTheLowestDeviceOfTheSameProcessNext) {
  // Devices 0,1 are process 0 and 2,3 process 1; the source is on 2 and 0.
  const PlanKey key =
      key_of({2}, sharding("x=2", {2, 0}, ""), sharding("y=2", {1, 3}, ""), Topology::uniform(4, 2));
  EXPECT_EQ(planned(key), (std::vector<Transfer>{{0, 1, box({0}, {2})}, {2, 3, box({0}, {2})}}));
  const PlanKey wider =
      key_of({2}, sharding("x=4", {3, 2, 1, 0}, ""), sharding("y=1", {1}, ""), Topology::uniform(8, 2));
  EXPECT_EQ(planned(wider), (std::vector<Transfer>{{1, 1, box({0}, {2})}}));
}

// Each target device fetching its own pieces, from the least-loaded holder.
constexpr PlanOptions kPerDevice{false, false};

TEST(Planner, PerDevicePlansSpreadRemoteSendsOverTheLeastLoadedProcess) {
  // Processes of two devices each; the source is replicated on processes 0 and
  // 1, the target lives on processes 2 and 3. Ties go to the lower process.
  const PlanKey key = key_of({8}, sharding("x=4", {3, 2, 1, 0}, ""), sharding("y=4", {4, 5, 6, 7}, "y"),
                             Topology::uniform(8, 4));
  const Plan plan = make_plan(key, kPerDevice);
  EXPECT_EQ(plan.transfers(), (std::vector<Transfer>{{0, 4, box({0}, {2})},
                                                     {2, 5, box({2}, {2})},
                                                     {0, 6, box({4}, {2})},
                                                     {2, 7, box({6}, {2})}}));
  EXPECT_EQ(plan.stats().bytes_cross_process, 32u);
  EXPECT_EQ(plan.stats().max_process_send_bytes, 16u);
}

TEST(Planner, PerDevicePlansCountLoadInBytesNotTransfers) {
  // Source [0:3] on devices 0 (process 0) and 2 (process 1), [3:5] on 1 and 3;
  // both targets (processes 2 and 3) want everything. Process 0 sends the
  // 3-byte piece, process 1 the 2-byte one; then process 1 (2 < 3) sends the
  // 3-byte piece and process 0 (3 < 5) the last. Counting transfers instead
  // would pick process 0 again on the tie at 1 transfer each.
  const PlanKey key = key_of({5}, sharding("x=2,r=2", {0, 2, 1, 3}, "x", true), sharding("y=2", {4, 6}, ""),
                             Topology::uniform(8, 4), DType::kI8);
  const Plan plan = make_plan(key, kPerDevice);
  plan.validate();
  EXPECT_EQ(plan.transfers(), (std::vector<Transfer>{{0, 4, box({0}, {3})},
                                                     {3, 4, box({3}, {2})},
                                                     {2, 6, box({0}, {3})},
                                                     {1, 6, box({3}, {2})}}));
  EXPECT_EQ(plan.stats().max_process_send_bytes, 5u);
}

TEST(Planner, CutsUnevenChunksAndSkipsEmptyOnes) {
  // Source [0:3] [3:5]; target [0:2] [2:4] [4:5] [5:5].
  const PlanKey key = key_of({5}, sharding("x=2", {}, "x", true), sharding("y=4", {}, "y", true),
                             Topology::uniform(4, 1));
  EXPECT_EQ(planned(key), (std::vector<Transfer>{{0, 0, box({0}, {2})},
                                                 {0, 1, box({2}, {1})},
                                                 {1, 1, box({3}, {1})},
                                                 {1, 2, box({4}, {1})}}));
}

TEST(Planner, CutsEveryDimensionAndHonoursTupleOrder) {
  // Source P(('b','a')) on a=2,b=2: logical (a,b) holds row 2b+a, so device 1
  // holds row 2 and device 2 row 1. Target: column j on device j.
  const PlanKey key = key_of({4, 4}, sharding("a=2,b=2", {}, "(b,a)"), sharding("x=4", {}, "None,x"),
                             Topology::uniform(4, 1));
  const std::vector<Transfer> transfers = planned(key);
  ASSERT_EQ(transfers.size(), 16u);
  EXPECT_EQ(std::vector<Transfer>(transfers.begin(), transfers.begin() + 4),
            (std::vector<Transfer>{{0, 0, box({0, 0}, {1, 1})},
                                   {2, 0, box({1, 0}, {1, 1})},
                                   {1, 0, box({2, 0}, {1, 1})},
                                   {3, 0, box({3, 0}, {1, 1})}}));
  EXPECT_EQ(transfers[15], (Transfer{3, 3, box({3, 3}, {1, 1})}));
}

TEST(Planner, AMemoryKindChangeCopiesWithinEachDevice) {
  const NamedSharding src = sharding("a=2,b=2", {3, 1, 2, 0}, "a,b");
  const PlanKey key = key_of({4, 6}, src, src.with_memory_kind(MemoryKind::kPinnedHost), Topology::uniform(4, 2));
  const Plan plan = make_plan(key);
  plan.validate();
  ASSERT_EQ(plan.transfers().size(), 4u);
  for (const Transfer& t : plan.transfers()) EXPECT_EQ(t.src, t.dst);
  EXPECT_EQ(plan.stats().bytes_same_device, 4u * 6 * 4);
  EXPECT_EQ(plan.stats().bytes_total, 4u * 6 * 4);
}

TEST(Planner, ScalarsAndEmptyArrays) {
  const PlanKey scalar = key_of({}, sharding("x=2", {0, 1}, ""), sharding("y=2", {1, 2}, ""), Topology::uniform(4, 2));
  EXPECT_EQ(planned(scalar), (std::vector<Transfer>{{1, 1, box({}, {})}, {0, 2, box({}, {})}}));
  const PlanKey empty = key_of({0, 4}, sharding("x=2", {}, "x"), sharding("y=2", {}, "None,y"), Topology::uniform(2, 1));
  EXPECT_TRUE(planned(empty).empty());
}

// The seed: f32[32, 8, 4096], mesh data=4, model=4 in TPU order to the same
// mesh in 2x2-block order, 4 processes of 4 devices. Logical (r, c) holds
// rows 8r.., columns 1024c..; the source puts it on device 4c + r.
TEST(Planner, SeedScenario) {
  const NamedSharding src = sharding("data=4,model=4", {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15},
                                     "data,None,model");
  const std::vector<DeviceId> dst_devices = {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};
  const NamedSharding dst = sharding("data=4,model=4", dst_devices, "data,None,model");
  const Plan plan = make_plan(key_of({32, 8, 4096}, src, dst, Topology::uniform(16, 4)));
  plan.validate();
  ASSERT_EQ(plan.transfers().size(), 16u);
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 4; ++c) {
      const Transfer& t = plan.transfers()[static_cast<size_t>(4 * r + c)];
      EXPECT_EQ(t, (Transfer{4 * c + r, dst_devices[static_cast<size_t>(4 * r + c)], box({8 * r, 0, 1024 * c}, {8, 8, 1024})}));
    }
  }
  constexpr uint64_t kShard = 8 * 8 * 1024 * 4;
  // By hand: devices 0 and 15 keep their shard, 1 -> 2 and 14 -> 13 stay in
  // their process, the other 12 cross (each process a host of its own: they
  // cross hosts too); processes 1 and 2 each send 4 shards.
  EXPECT_EQ(plan.stats(), (PlanStats{.bytes_total = 16 * kShard,
                                     .bytes_same_device = 2 * kShard,
                                     .bytes_same_process = 2 * kShard,
                                     .bytes_cross_process = 12 * kShard,
                                     .max_process_send_bytes = 4 * kShard,
                                     .bytes_cross_host = 12 * kShard}));
}

TEST(Planner, SeedMeshesWithAReplicatedSourceCrossNothing) {
  // Source rows split over `data` only: row block r sits on devices r, 4+r,
  // 8+r, 12+r, one in every process, so every target finds its rows at home.
  // Targets 0, 4, 11 and 15 hold their own rows already (t mod 4 == r).
  const NamedSharding src =
      sharding("data=4,model=4", {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}, "data");
  const NamedSharding dst =
      sharding("data=4,model=4", {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15}, "data,None,model");
  const Plan plan = make_plan(key_of({32, 8, 4096}, src, dst, Topology::uniform(16, 4)));
  plan.validate();
  constexpr uint64_t kShard = 8 * 8 * 1024 * 4;
  EXPECT_EQ(plan.stats(), (PlanStats{16 * kShard, 4 * kShard, 12 * kShard, 0, 0}));
}

// The seed's "make this array appear replicated": every process's four
// devices want everything, and it holds a quarter. Each remote element
// crosses into a process once (3 MiB into each, 12 MiB in all, not 48) and
// is copied to the other three devices there.
TEST(Planner, SeedReplicatedTargetCrossesIntoEachProcessOnce) {
  const NamedSharding src = sharding("data=4,model=4", {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15},
                                     "data,None,model");
  const PlanKey key = key_of({32, 8, 4096}, src, sharding("data=4,model=4", {}, ""), Topology::uniform(16, 4));
  const Plan plan = make_plan(key);
  plan.validate();
  constexpr uint64_t kMiB = 1 << 20;
  EXPECT_EQ(plan.stats().bytes_cross_process, 12 * kMiB);
  EXPECT_EQ(plan.stats().max_process_send_bytes, 3 * kMiB);
  EXPECT_EQ(plan.stats().bytes_fan_out, 4 * 3 * 3 * kMiB);
  EXPECT_EQ(plan.stats().bytes_total, 16 * 4 * kMiB);
  for (const Transfer& t : plan.transfers()) {
    if (t.stage == 1) {
      EXPECT_EQ(t.src % 4, 0) << "the lowest device of each process receives for the others";
    }
    if (t.stage == 0 && t.src / 4 != t.dst / 4) {
      EXPECT_EQ(t.dst % 4, 0);
    }
  }
  const Plan per_device = make_plan(key, kPerDevice);
  EXPECT_EQ(per_device.stats().bytes_cross_process, 48 * kMiB);
  EXPECT_EQ(per_device.stats().bytes_fan_out, 0u);
}

TEST(Planner, FanOutCopiesFromTheLowestDeviceOfTheProcess) {
  // f32[4]: halves on devices 0 and 1 (process 0); the target wants all of it
  // on devices 5, 4 and 6 of process 1 (devices 4..7), listed out of order.
  const PlanKey key = key_of({4}, sharding("x=2", {0, 1}, "x"), sharding("y=3", {5, 4, 6}, ""),
                             Topology::uniform(8, 2));
  EXPECT_EQ(planned(key), (std::vector<Transfer>{{0, 4, box({0}, {2})},
                                                 {1, 4, box({2}, {2})},
                                                 {4, 5, box({0}, {2}), 1},
                                                 {4, 5, box({2}, {2}), 1},
                                                 {4, 6, box({0}, {2}), 1},
                                                 {4, 6, box({2}, {2}), 1}}));
}

TEST(Planner, FanOutLeavesWhatTheProcessHoldsToLocalCopies) {
  // Device 2 (process 1) holds rows 2..3; both targets of process 1 take
  // those from it, and rows 0..1 cross once, into device 2.
  const PlanKey key = key_of({4, 2}, sharding("x=2", {0, 2}, "x"), sharding("y=2", {3, 2}, ""),
                             Topology::uniform(4, 2));
  EXPECT_EQ(planned(key), (std::vector<Transfer>{{2, 3, box({2, 0}, {2, 2})},
                                                 {0, 2, box({0, 0}, {2, 2})},
                                                 {2, 2, box({2, 0}, {2, 2})},
                                                 {2, 3, box({0, 0}, {2, 2}), 1}}));
}

TEST(Planner, AScalarFansOutToo) {
  const PlanKey key = key_of({}, sharding("x=1", {0}, ""), sharding("y=2", {3, 2}, ""), Topology::uniform(4, 2));
  EXPECT_EQ(planned(key), (std::vector<Transfer>{{0, 2, box({}, {})}, {2, 3, box({}, {}), 1}}));
}

TEST(Planner, SharesOutAReplicatedSourceEvenly) {
  // The source is replicated on processes 0 and 1 (devices 0..3), the target
  // lives on processes 2 and 3: each holder sends half.
  const PlanKey key = key_of({8}, sharding("x=4", {3, 2, 1, 0}, ""), sharding("y=4", {4, 5, 6, 7}, "y"),
                             Topology::uniform(8, 4));
  const Plan plan = make_plan(key);
  EXPECT_EQ(plan.transfers(), (std::vector<Transfer>{{0, 4, box({0}, {2})},
                                                     {0, 5, box({2}, {2})},
                                                     {2, 6, box({4}, {2})},
                                                     {2, 7, box({6}, {2})}}));
  EXPECT_EQ(plan.stats().max_process_send_bytes, 16u);
}

TEST(Planner, SplitsAPieceByRowsOverItsHolders) {
  // One f32[6, 4] piece that processes 0, 1 and 2 all hold, wanted by process 3.
  const PlanKey key = key_of({6, 4}, sharding("x=3", {0, 1, 2}, ""), sharding("y=1", {3}, ""),
                             Topology::uniform(4, 4));
  const Plan plan = make_plan(key);
  plan.validate();
  EXPECT_EQ(plan.transfers(), (std::vector<Transfer>{{0, 3, box({0, 0}, {2, 4})},
                                                     {1, 3, box({2, 0}, {2, 4})},
                                                     {2, 3, box({4, 0}, {2, 4})}}));
  EXPECT_EQ(plan.stats().max_process_send_bytes, 32u);
  // A single row is cut along the next dimension.
  const PlanKey row = key_of({1, 6}, sharding("x=3", {0, 1, 2}, ""), sharding("y=1", {3}, ""),
                             Topology::uniform(4, 4));
  EXPECT_EQ(planned(row), (std::vector<Transfer>{{0, 3, box({0, 0}, {1, 2})},
                                                 {1, 3, box({0, 2}, {1, 2})},
                                                 {2, 3, box({0, 4}, {1, 2})}}));
}

TEST(Planner, BatchesBalanceSendersAcrossArrays) {
  // Array a: only process 0 holds it. Array b: processes 0 and 1 both do.
  // Alone, b is split half and half; with a in the same batch, process 1
  // sends all of b and neither sends more than one array's bytes.
  const Topology job = Topology::uniform(3, 3);
  const PlanKey a = key_of({8}, sharding("x=1", {0}, ""), sharding("y=1", {2}, ""), job);
  const PlanKey b = key_of({8}, sharding("x=2", {0, 1}, ""), sharding("y=1", {2}, ""), job);
  EXPECT_EQ(planned(b), (std::vector<Transfer>{{0, 2, box({0}, {4})}, {1, 2, box({4}, {4})}}));
  const std::vector<PlanKey> keys = {a, b};
  const std::vector<Plan> plans = make_plans(keys);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].transfers(), (std::vector<Transfer>{{0, 2, box({0}, {8})}}));
  EXPECT_EQ(plans[1].transfers(), (std::vector<Transfer>{{1, 2, box({0}, {8})}}));
  for (const Plan& plan : plans) plan.validate();
  EXPECT_EQ(make_plans(std::span(&b, 1)).front(), make_plan(b));
  EXPECT_TRUE(make_plans({}).empty());
}

TEST(Planner, BatchErrorsNameTheArray) {
  const Topology job = Topology::uniform(4, 1);
  const std::vector<PlanKey> keys = {key_of({4}, sharding("x=2", {}, "x"), sharding("y=2", {}, "y"), job),
                                     key_of({6}, sharding("x=4", {}, "x"), sharding("y=2", {}, "y"), job)};
  EXPECT_TRUE(throws_error([&] { make_plans(keys); }, ErrorCode::kIndivisible, {"array 1 of 2", "source layout"}));
}

TEST(Planner, IsDeterministic) {
  const PlanKey key = key_of({12, 6}, sharding("a=2,b=3", {5, 0, 3, 1, 4, 2}, "b"),
                             sharding("x=3,y=2", {}, "(y,x)"), Topology::uniform(6, 3));
  EXPECT_EQ(make_plan(key), make_plan(key));
}

TEST(Planner, NamesTheLayoutThatDoesNotFit) {
  const Topology job = Topology::uniform(4, 1);
  EXPECT_TRUE(throws_error([&] { make_plan(key_of({6}, sharding("x=4", {}, "x"), sharding("y=2", {}, "y"), job)); },
                           ErrorCode::kIndivisible, {"source layout", "divisible by 4"}));
  EXPECT_TRUE(throws_error([&] { make_plan(key_of({6}, sharding("x=2", {}, "x"), sharding("y=4", {}, "y"), job)); },
                           ErrorCode::kIndivisible, {"target layout"}));
  EXPECT_TRUE(throws_error([&] { make_plan(key_of({4}, sharding("x=2", {}, "x"), sharding("y=2", {3, 7}, "y"), job)); },
                           ErrorCode::kUnknownDevice, {"target layout", "devices the topology lacks: 7"}));
  EXPECT_TRUE(throws_error([&] { make_plan(key_of({4}, sharding("x=2", {}, "None,x"), sharding("y=2", {}, "y"), job)); },
                           ErrorCode::kRank, {"source layout"}));
}

}  // namespace
}  // namespace reshard
