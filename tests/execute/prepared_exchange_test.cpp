// prepare_exchange: an operation over the plans of a recent one takes what was derived for it, and nothing else does.
#include "execute/prepared_exchange.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "reshard/execute/sharded_array.h"
#include "reshard/plan/planner.h"

namespace reshard::execute_detail {
namespace {

// Rows to columns over 8 devices on 2 processes, as process `process` holds it.
struct Case {
  Topology topology = Topology::uniform(8, 2);
  Shape shape{64, 256};
  NamedSharding by_rows{Mesh({{"x", 8}}, {0, 1, 2, 3, 4, 5, 6, 7}), PartitionSpec({{"x"}})};
  NamedSharding by_columns{Mesh({{"x", 8}}, {7, 6, 5, 4, 3, 2, 1, 0}), PartitionSpec({{}, {"x"}})};
  Plan plan = make_plan(PlanKey{shape, DType::kF32, by_rows, by_columns, topology});

  std::vector<ShardedArray> arrays(int process, const NamedSharding& sharding) const {
    std::vector<ShardedArray> out;
    out.push_back(ShardedArray::allocate(shape, DType::kF32, sharding, topology, process));
    return out;
  }
};

TEST(PreparedExchange, TheSamePlansTakeWhatWasPreparedAndEachPieceHasItsCopy) {
  const Case c;
  const std::vector<ShardedArray> src = c.arrays(0, c.by_rows);
  std::vector<ShardedArray> dst = c.arrays(0, c.by_columns);
  const ArrayMove move{&c.plan, &src[0], &dst[0]};
  const auto first = prepare_exchange(std::span(&move, 1), 0, 4096, 0);
  ASSERT_FALSE(first->messages.sends.empty());
  ASSERT_EQ(first->send_copies.size(), first->messages.sends.size());
  ASSERT_EQ(first->receive_copies.size(), first->messages.receives.size());
  for (size_t m = 0; m < first->messages.sends.size(); ++m) {
    ASSERT_EQ(first->send_copies[m].size(), first->messages.sends[m].pieces.size());
    for (size_t p = 0; p < first->send_copies[m].size(); ++p) {
      const Transfer& t = c.plan.transfers()[first->messages.sends[m].pieces[p].transfer];
      EXPECT_EQ(first->send_copies[m][p].bytes(), static_cast<uint64_t>(t.box.volume()) * 4);
    }
  }
  // Process 0's copies within itself: every transfer between its own devices, once.
  size_t own = 0;
  for (const Transfer& t : c.plan.transfers()) {
    if (c.topology.process_of(t.src) == 0 && c.topology.process_of(t.dst) == 0) ++own;
  }
  ASSERT_EQ(first->local.size(), own);
  for (const PreparedExchange::LocalCopy& local : first->local) {
    const Transfer& t = c.plan.transfers()[local.transfer];
    EXPECT_EQ(c.topology.process_of(t.src), 0);
    EXPECT_EQ(c.topology.process_of(t.dst), 0);
    EXPECT_EQ(local.copy.bytes(), static_cast<uint64_t>(t.box.volume()) * 4);
    EXPECT_EQ(src[0].shards()[local.src_shard].device, t.src);
    EXPECT_EQ(dst[0].shards()[local.dst_shard].device, t.dst);
  }
  // Other arrays (other memory) under an equal plan made anew: the same.
  const Plan again = make_plan(c.plan.key());
  const std::vector<ShardedArray> src2 = c.arrays(0, c.by_rows);
  std::vector<ShardedArray> dst2 = c.arrays(0, c.by_columns);
  const ArrayMove move2{&again, &src2[0], &dst2[0]};
  EXPECT_EQ(prepare_exchange(std::span(&move2, 1), 0, 4096, 0), first);
  // Another message size, process or stage: prepared on its own.
  EXPECT_NE(prepare_exchange(std::span(&move, 1), 0, 8192, 0), first);
  EXPECT_NE(prepare_exchange(std::span(&move, 1), 0, 4096, 2), first);
  const std::vector<ShardedArray> src1 = c.arrays(1, c.by_rows);
  std::vector<ShardedArray> dst1 = c.arrays(1, c.by_columns);
  const ArrayMove move1{&c.plan, &src1[0], &dst1[0]};
  const auto other_process = prepare_exchange(std::span(&move1, 1), 1, 4096, 0);
  EXPECT_NE(other_process, first);
  EXPECT_EQ(other_process->messages.sends.front().src_process, 1);
}

TEST(PreparedExchange, PlansWithTheSameTransfersOnOtherProcessesAreNotTakenForEachOther) {
  // The same devices and boxes, so the same transfers (and digest), but 4
  // processes of 2 devices instead of 2 of 4: other messages entirely.
  const Case c;
  const Topology four = Topology::uniform(8, 4);
  const Plan other = make_plan(PlanKey{c.shape, DType::kF32, c.by_rows, c.by_columns, four});
  ASSERT_EQ(other.digest(), c.plan.digest()) << "the case needs plans whose transfers agree";
  const std::vector<ShardedArray> src = c.arrays(0, c.by_rows);
  std::vector<ShardedArray> dst = c.arrays(0, c.by_columns);
  const ShardedArray src4 = ShardedArray::allocate(c.shape, DType::kF32, c.by_rows, four, 0);
  ShardedArray dst4 = ShardedArray::allocate(c.shape, DType::kF32, c.by_columns, four, 0);
  const ArrayMove move{&c.plan, &src[0], &dst[0]};
  const ArrayMove move4{&other, &src4, &dst4};
  const auto two = prepare_exchange(std::span(&move, 1), 0, 4096, 0);
  const auto of_four = prepare_exchange(std::span(&move4, 1), 0, 4096, 0);
  EXPECT_NE(two, of_four);
  const auto sends_to = [](const PreparedExchange& p, int process) {
    return std::any_of(p.messages.sends.begin(), p.messages.sends.end(),
                       [process](const Message& m) { return m.dst_process == process; });
  };
  EXPECT_TRUE(sends_to(*of_four, 3)) << "process 0 of 4 sends to process 3";
  EXPECT_FALSE(sends_to(*two, 3));
}

// Every run of every message lies in one of the shards it names, and the
// runs cover exactly the message's bytes. (Rows of several pieces may merge
// into one entry, even across shards that happen to lie evenly apart.)
template <typename Rows>
void expect_runs_in_shards(const std::vector<Rows>& rows, const std::vector<ShardRef>& refs, const ShardedArray& array,
                           bool target, uint64_t message_bytes, const std::string& what) {
  uint64_t bytes = 0;
  for (const Rows& r : rows) {
    for (uint64_t i = 0; i < r.count; ++i) {
      const std::byte* run = r.data + static_cast<int64_t>(i) * r.stride;
      const bool in_a_shard = std::any_of(refs.begin(), refs.end(), [&](const ShardRef& ref) {
        const Shard& shard = array.shards()[ref.shard];
        return ref.target == target && run >= shard.buffer.data() &&
               run + r.size <= shard.buffer.data() + shard.buffer.size();
      });
      EXPECT_TRUE(in_a_shard) << what << ", run " << i;
    }
    bytes += r.size * r.count;
  }
  EXPECT_EQ(bytes, message_bytes) << what;
}

void expect_rows_in_arrays(const PreparedExchange& prepared, const ExchangeRows& rows, const ShardedArray& src,
                           const ShardedArray& dst) {
  ASSERT_EQ(rows.sends.size(), prepared.messages.sends.size());
  ASSERT_EQ(rows.receives.size(), prepared.messages.receives.size());
  for (size_t m = 0; m < rows.sends.size(); ++m) {
    expect_runs_in_shards(rows.sends[m], rows.send_shards[m], src, false, prepared.messages.sends[m].bytes,
                          "send " + std::to_string(m));
  }
  for (size_t m = 0; m < rows.receives.size(); ++m) {
    expect_runs_in_shards(rows.receives[m], rows.receive_shards[m], dst, true, prepared.messages.receives[m].bytes,
                          "receive " + std::to_string(m));
  }
}

TEST(ExchangeRows, TheSameArraysTakeTheRowsTheyHadAndOtherArraysGetTheirOwn) {
  const Case c;
  const std::vector<ShardedArray> src = c.arrays(0, c.by_rows);
  std::vector<ShardedArray> dst = c.arrays(0, c.by_columns);
  const ArrayMove move{&c.plan, &src[0], &dst[0]};
  const auto prepared = prepare_exchange(std::span(&move, 1), 0, 4096, 0);
  const auto rows = exchange_rows(std::span(&move, 1), *prepared);
  expect_rows_in_arrays(*prepared, *rows, src[0], dst[0]);
  EXPECT_EQ(exchange_rows(std::span(&move, 1), *prepared), rows);
  // The same plans over other memory (a new target, then a new source):
  // rows of their own, in those arrays, never the old ones.
  std::vector<ShardedArray> dst2 = c.arrays(0, c.by_columns);
  const ArrayMove new_target{&c.plan, &src[0], &dst2[0]};
  const auto rows2 = exchange_rows(std::span(&new_target, 1), *prepared);
  EXPECT_NE(rows2, rows);
  expect_rows_in_arrays(*prepared, *rows2, src[0], dst2[0]);
  const std::vector<ShardedArray> src3 = c.arrays(0, c.by_rows);
  const ArrayMove new_source{&c.plan, &src3[0], &dst2[0]};
  const auto rows3 = exchange_rows(std::span(&new_source, 1), *prepared);
  EXPECT_NE(rows3, rows2);
  expect_rows_in_arrays(*prepared, *rows3, src3[0], dst2[0]);
}

}  // namespace
}  // namespace reshard::execute_detail
