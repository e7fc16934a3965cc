// Plan: statistics from its transfers, and validate() catching each kind of mistake.
#include "reshard/plan/plan.h"

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "plan/support/layouts.h"
#include "reshard/layout/error.h"
#include "support/seed.h"

namespace reshard {
namespace {

using testing::sharding;
using testing::throws_error;

Box box(std::vector<int64_t> origin, Shape shape) { return Box(std::move(origin), std::move(shape)); }

// f32[8, 4]: source rows split over devices 0,1 (process 0) and 2,3 (process 1)
// as x=4; target rows split in halves over devices 1 and 2.
PlanKey rows_key() {
  return PlanKey{{8, 4}, DType::kF32, sharding("x=4", {0, 1, 2, 3}, "x"), sharding("y=2", {1, 2}, "y"),
                 Topology::uniform(4, 2)};
}

// A correct plan for rows_key(): device 1 gets rows 0..3 from 0 and itself,
// device 2 gets rows 4..7 from itself and 3.
std::vector<Transfer> rows_transfers() {
  return {{0, 1, box({0, 0}, {2, 4})},
          {1, 1, box({2, 0}, {2, 4})},
          {2, 2, box({4, 0}, {2, 4})},
          {3, 2, box({6, 0}, {2, 4})}};
}

TEST(Plan, StatsSplitBytesBySameDeviceProcessAndCrossProcess) {
  std::vector<Transfer> transfers = rows_transfers();
  transfers[0].src = 0;  // same process as device 1
  Plan plan(rows_key(), transfers);
  EXPECT_EQ(plan.stats().bytes_total, 8u * 4 * 4);
  EXPECT_EQ(plan.stats().bytes_same_device, 2u * 2 * 4 * 4);
  EXPECT_EQ(plan.stats().bytes_same_process, 2u * 4 * 4 * 2);
  EXPECT_EQ(plan.stats().bytes_cross_process, 0u);
  EXPECT_EQ(plan.stats().max_process_send_bytes, 0u);
  EXPECT_NO_THROW(plan.validate());
}

TEST(Plan, MaxProcessSendIsTheLargestSenderNotTheTotal) {
  // Target: all of f32[8] on device 0 (process 0) and on device 2 (process 1),
  // sources each hold a quarter. Process 1 sends 2x8 bytes, process 0 sends 8 bytes.
  const PlanKey key{{8}, DType::kF32, sharding("x=4", {0, 1, 2, 3}, "x"), sharding("y=2", {0, 2}, ""),
                    Topology::uniform(4, 2)};
  Plan plan(key, {{0, 0, box({0}, {2})},
                  {1, 0, box({2}, {2})},
                  {2, 0, box({4}, {2})},
                  {3, 0, box({6}, {2})},
                  {0, 2, box({0}, {2})},
                  {2, 2, box({2}, {2})},  // wrong source on purpose: stats do not judge
                  {2, 2, box({4}, {2})},
                  {3, 2, box({6}, {2})}});
  EXPECT_EQ(plan.stats().bytes_total, 64u);
  EXPECT_EQ(plan.stats().bytes_same_device, 24u);
  EXPECT_EQ(plan.stats().bytes_same_process, 16u);
  EXPECT_EQ(plan.stats().bytes_cross_process, 24u);
  EXPECT_EQ(plan.stats().max_process_send_bytes, 16u);
}

TEST(Plan, BytesFollowTheDtype) {
  PlanKey key = rows_key();
  key.dtype = DType::kBF16;
  EXPECT_EQ(Plan(key, rows_transfers()).stats().bytes_total, 8u * 4 * 2);
  key.dtype = DType::kF4;
  EXPECT_EQ(Plan(key, rows_transfers()).stats().bytes_total, 8u * 4 / 2);
}

// A random extent: small, empty, or large enough that volumes overflow.
int64_t random_extent(std::mt19937_64& rng) {
  static constexpr int64_t kSpecial[] = {0, 1, 2, 3, 5, int64_t{1} << 31, int64_t{1} << 40, int64_t{1} << 61,
                                         int64_t{1} << 62, INT64_MAX / 3, INT64_MAX};
  if (rng() % 2 == 0) return static_cast<int64_t>(rng() % 64);
  return kSpecial[rng() % std::size(kSpecial)];
}

// The stats count a transfer's bytes inline for speed: they must be
// dtype_byte_size(volume) exactly, and fail with its error (overflow, or
// sub-byte elements that do not fill whole bytes) where it does.
TEST(Plan, TransferBytesAreTheDtypeSizeOfTheVolume) {
  std::mt19937_64 rng = testing::seeded_rng();
  int overflows = 0, partial_bytes = 0;
  for (int i = 0; i < 20000; ++i) {
    Shape shape(rng() % 5);
    for (int64_t& extent : shape) extent = random_extent(rng);
    PlanKey key = rows_key();
    key.dtype = static_cast<DType>(rng() % kNumDTypes);
    const Box piece(std::vector<int64_t>(shape.size(), 0), shape);
    SCOPED_TRACE(::testing::Message() << dtype_name(key.dtype) << " " << piece.to_string());
    try {
      const uint64_t bytes = dtype_byte_size(key.dtype, static_cast<uint64_t>(piece.volume()));
      EXPECT_EQ(Plan(key, {{0, 1, piece}}).stats().bytes_total, bytes);
    } catch (const Error& expected) {
      overflows += expected.code() == ErrorCode::kOverflow;
      partial_bytes += expected.code() == ErrorCode::kInvalidArgument;
      EXPECT_TRUE(throws_error([&] { Plan(key, {{0, 1, piece}}); }, expected.code(), {expected.what()}));
    }
  }
  EXPECT_GT(overflows, 100);
  EXPECT_GT(partial_bytes, 100);
}

TEST(Plan, TransferOutsideTheJobIsRejectedAtConstruction) {
  std::vector<Transfer> transfers = rows_transfers();
  transfers[0].src = 9;
  EXPECT_TRUE(throws_error([&] { Plan(rows_key(), transfers); }, ErrorCode::kInvalidPlan, {"device 9"}));
}

TEST(Plan, EqualityComparesKeyAndTransfers) {
  const Plan plan(rows_key(), rows_transfers());
  EXPECT_EQ(plan, Plan(rows_key(), rows_transfers()));
  std::vector<Transfer> reordered = rows_transfers();
  std::swap(reordered[0], reordered[1]);
  EXPECT_NE(plan, Plan(rows_key(), reordered));
  PlanKey other = rows_key();
  other.dtype = DType::kI32;
  EXPECT_NE(plan, Plan(other, rows_transfers()));
}

TEST(Plan, DigestFollowsWhatTheMessagesDependOn) {
  const Plan plan(rows_key(), rows_transfers());
  EXPECT_EQ(plan.digest(), Plan(rows_key(), rows_transfers()).digest());
  std::vector<Transfer> reordered = rows_transfers();
  std::swap(reordered[0], reordered[1]);
  EXPECT_NE(plan.digest(), Plan(rows_key(), reordered).digest());
  std::vector<Transfer> moved = rows_transfers();
  moved[3].src = 2;
  EXPECT_NE(plan.digest(), Plan(rows_key(), moved).digest());
  std::vector<Transfer> staged = rows_transfers();
  staged[3].stage = 1;
  EXPECT_NE(plan.digest(), Plan(rows_key(), staged).digest());
  std::vector<Transfer> reshaped = rows_transfers();
  reshaped[3].box = box({6, 0}, {2, 3});
  EXPECT_NE(plan.digest(), Plan(rows_key(), reshaped).digest());
  PlanKey other = rows_key();
  other.dtype = DType::kI32;
  EXPECT_NE(plan.digest(), Plan(other, rows_transfers()).digest());
}

// Each violation below starts from the correct plan and breaks one thing.
::testing::AssertionResult rejects(std::vector<Transfer> transfers, std::initializer_list<std::string_view> words,
                                   PlanKey key = rows_key()) {
  return throws_error([&] { Plan(std::move(key), std::move(transfers)).validate(); }, ErrorCode::kInvalidPlan, words);
}

TEST(PlanValidate, AcceptsTheCorrectPlanInAnyOrder) {
  std::vector<Transfer> transfers = rows_transfers();
  EXPECT_NO_THROW(Plan(rows_key(), transfers).validate());
  std::reverse(transfers.begin(), transfers.end());
  EXPECT_NO_THROW(Plan(rows_key(), transfers).validate());
}

TEST(PlanValidate, CatchesAGap) {
  std::vector<Transfer> transfers = rows_transfers();
  transfers.erase(transfers.begin() + 2);
  EXPECT_TRUE(rejects(transfers, {"target device 2", "gap", "8 of the 16"}));
}

TEST(PlanValidate, CatchesADuplicate) {
  std::vector<Transfer> transfers = rows_transfers();
  transfers.push_back(transfers[1]);
  EXPECT_TRUE(rejects(transfers, {"target device 1", "twice", "[2:4, 0:4]"}));
}

TEST(PlanValidate, CatchesAnOverlapThatHidesAGap) {
  // Same total volume as the slice, so only the disjointness check can see it.
  PlanKey key = rows_key();
  key.src = sharding("x=4", {0, 1, 2, 3}, "");  // every source holds every row
  std::vector<Transfer> transfers = rows_transfers();
  transfers[0].box = box({0, 0}, {3, 4});  // rows 0..2 overlap row 2 of the next
  transfers[1].box = box({2, 0}, {1, 4});  // row 3 is now missing
  EXPECT_TRUE(rejects(transfers, {"target device 1", "receives [2:3, 0:4] twice"}, key));
}

TEST(PlanValidate, CatchesASourceThatDoesNotHoldTheBox) {
  std::vector<Transfer> transfers = rows_transfers();
  transfers[0].src = 3;
  EXPECT_TRUE(rejects(transfers, {"transfer 0", "source device 3 holds only [6:8, 0:4]"}));
}

TEST(PlanValidate, CatchesASourceOutsideTheSourceMesh) {
  PlanKey key = rows_key();
  key.src = sharding("x=2", {0, 1}, "x");
  std::vector<Transfer> transfers = {{0, 1, box({0, 0}, {4, 4})}, {3, 2, box({4, 0}, {4, 4})}};
  EXPECT_TRUE(rejects(transfers, {"transfer 1", "source device 3 is not in the source mesh"}, key));
}

TEST(PlanValidate, CatchesATargetOutsideTheTargetMesh) {
  std::vector<Transfer> transfers = rows_transfers();
  transfers[0].dst = 0;
  EXPECT_TRUE(rejects(transfers, {"transfer 0", "target device 0 is not in the target mesh"}));
}

TEST(PlanValidate, CatchesABoxSentToTheWrongTarget) {
  std::vector<Transfer> transfers = rows_transfers();
  transfers[0].dst = 2;
  EXPECT_TRUE(rejects(transfers, {"transfer 0", "target device 2 needs only [4:8, 0:4]"}));
}

TEST(PlanValidate, CatchesABoxOutsideTheArray) {
  std::vector<Transfer> transfers = rows_transfers();
  transfers[3].box = box({6, 0}, {2, 5});
  EXPECT_TRUE(rejects(transfers, {"transfer 3", "outside the array [0:8, 0:4]"}));
  transfers[3].box = box({-1, 0}, {2, 4});
  EXPECT_TRUE(rejects(transfers, {"transfer 3", "outside the array"}));
}

TEST(PlanValidate, CatchesAnEmptyTransfer) {
  std::vector<Transfer> transfers = rows_transfers();
  transfers.push_back({0, 1, box({0, 0}, {0, 4})});
  EXPECT_TRUE(rejects(transfers, {"transfer 4", "is empty"}));
}

TEST(PlanValidate, CatchesAWrongRank) {
  std::vector<Transfer> transfers = rows_transfers();
  transfers[2].box = box({4}, {2});
  EXPECT_TRUE(rejects(transfers, {"transfer 2", "rank 1", "rank 2"}));
}

TEST(PlanValidate, CatchesAKeyWhoseShardingDoesNotFitTheShape) {
  PlanKey key = rows_key();
  key.shape = {6, 4};  // 6 rows do not split over x=4
  EXPECT_TRUE(rejects({}, {"source sharding does not fit"}, key));
}

TEST(PlanValidate, EveryTargetReplicaNeedsItsOwnTransfers) {
  PlanKey key = rows_key();
  key.dst = sharding("y=2", {1, 2}, "");  // both hold everything
  std::vector<Transfer> transfers = {{0, 1, box({0, 0}, {2, 4})}, {1, 1, box({2, 0}, {2, 4})},
                                     {2, 1, box({4, 0}, {2, 4})}, {3, 1, box({6, 0}, {2, 4})}};
  EXPECT_TRUE(rejects(transfers, {"target device 2", "0 of the 32"}, key));
  for (Transfer t : std::vector<Transfer>(transfers)) {
    t.dst = 2;
    transfers.push_back(t);
  }
  EXPECT_NO_THROW(Plan(key, transfers).validate());
}

TEST(PlanValidate, EmptyTargetSlicesNeedNothing) {
  PlanKey key = rows_key();
  key.shape = {3, 4};
  key.src = sharding("x=4", {0, 1, 2, 3}, "x", /*uneven=*/true);  // [0:1] [1:2] [2:3] [3:3]
  key.dst = sharding("y=2", {1, 2}, "y", /*uneven=*/true);       // [0:2] [2:3]
  const std::vector<Transfer> transfers = {{0, 1, box({0, 0}, {1, 4})},
                                           {1, 1, box({1, 0}, {1, 4})},
                                           {2, 2, box({2, 0}, {1, 4})}};
  EXPECT_NO_THROW(Plan(key, transfers).validate());
}

TEST(PlanValidate, ScalarsNeedExactlyOneTransferPerTarget) {
  PlanKey key = rows_key();
  key.shape = {};
  key.src = sharding("x=4", {0, 1, 2, 3}, "");
  key.dst = sharding("y=2", {1, 2}, "");
  EXPECT_NO_THROW(Plan(key, {{1, 1, box({}, {})}, {2, 2, box({}, {})}}).validate());
  EXPECT_TRUE(rejects({{1, 1, box({}, {})}, {0, 1, box({}, {})}, {2, 2, box({}, {})}}, {"twice"}, key));
  EXPECT_TRUE(rejects({{1, 1, box({}, {})}}, {"target device 2", "gap"}, key));
}

// f32[8, 4]: source rows split over devices 0,1 (process 0) and 2,3 (process
// 1); target: everything on both devices 2 and 3 of process 1.
PlanKey fan_out_key() {
  PlanKey key = rows_key();
  key.dst = sharding("y=2", {2, 3}, "");
  return key;
}

// Rows 0..3 cross into device 2 in two boxes, and one stage-1 copy gives
// them to device 3; rows 4..7 are in process 1 already.
std::vector<Transfer> fan_out_transfers() {
  return {{0, 2, box({0, 0}, {2, 4})}, {1, 2, box({2, 0}, {2, 4})}, {2, 2, box({4, 0}, {2, 4})},
          {3, 2, box({6, 0}, {2, 4})}, {2, 3, box({4, 0}, {2, 4})}, {3, 3, box({6, 0}, {2, 4})},
          {2, 3, box({0, 0}, {4, 4}), 1}};
}

TEST(Plan, StatsCountStageOneAsFanOutOnly) {
  const Plan plan(fan_out_key(), fan_out_transfers());
  EXPECT_EQ(plan.stats(), (PlanStats{.bytes_total = 2 * 8 * 4 * 4,
                                     .bytes_same_device = 2 * 4 * 4 * 2,
                                     .bytes_same_process = 2 * 2 * 4 * 4,
                                     .bytes_cross_process = 4 * 4 * 4,
                                     .max_process_send_bytes = 4 * 4 * 4,
                                     .bytes_fan_out = 4 * 4 * 4,
                                     .bytes_cross_host = 4 * 4 * 4}));
  EXPECT_NO_THROW(plan.validate());
}

TEST(PlanValidate, AcceptsAStageOneBoxCoveredByManyStageZeroBoxes) {
  EXPECT_NO_THROW(Plan(fan_out_key(), fan_out_transfers()).validate());
}

TEST(PlanValidate, CatchesAStageOneSourceThatGotPartOfTheBoxInStageOne) {
  // Rows 2..3 go round in a circle: device 3 copies them from 2, which copies
  // them from 3. Every slice is covered once, but nothing brings them in.
  const std::vector<Transfer> transfers = {
      {0, 2, box({0, 0}, {2, 4})},    {2, 2, box({4, 0}, {2, 4})},   {3, 2, box({6, 0}, {2, 4})},
      {2, 3, box({4, 0}, {2, 4})},    {3, 3, box({6, 0}, {2, 4})},   {2, 3, box({0, 0}, {4, 4}), 1},
      {3, 2, box({2, 0}, {2, 4}), 1}};
  EXPECT_TRUE(rejects(transfers, {"transfer 5", "device 2 receives only 8 of its 16 elements in stage 0"},
                      fan_out_key()));
}

TEST(PlanValidate, CatchesStageOneRuleBreaks) {
  const PlanKey key = fan_out_key();
  std::vector<Transfer> transfers = fan_out_transfers();
  transfers[6].src = 3;
  EXPECT_TRUE(rejects(transfers, {"transfer 6", "copies a device onto itself"}, key));
  transfers[6].src = 1;
  EXPECT_TRUE(rejects(transfers, {"transfer 6", "device 1 is not in the target mesh"}, key));
  transfers[6].stage = 2;
  EXPECT_TRUE(rejects(transfers, {"transfer 6", "stage 2"}, key));
  // A stage-1 source in another process: device 1 as a target.
  PlanKey wide = key;
  wide.dst = sharding("y=2", {1, 3}, "");
  std::vector<Transfer> across = {{0, 1, box({0, 0}, {2, 4})}, {1, 1, box({2, 0}, {2, 4})},
                                  {2, 1, box({4, 0}, {2, 4})}, {3, 1, box({6, 0}, {2, 4})},
                                  {1, 3, box({0, 0}, {8, 4}), 1}};
  EXPECT_TRUE(rejects(across, {"transfer 4", "crosses from process 0 to process 1"}, wide));
}

TEST(PlanValidate, CatchesStageZeroAfterStageOne) {
  std::vector<Transfer> transfers = fan_out_transfers();
  std::swap(transfers[5], transfers[6]);
  EXPECT_TRUE(rejects(transfers, {"transfer 6", "comes after a stage-1 transfer; stages come in order"}, fan_out_key()));
}

}  // namespace
}  // namespace reshard
