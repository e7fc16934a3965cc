#include "execute/message_schedule.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "execute/support/reference_arrays.h"
#include "reshard/layout/error.h"
#include "reshard/plan/planner.h"
#include "support/seed.h"

namespace reshard::execute_detail {
namespace {

using testing::pick;

bool same_message(const Message& a, const Message& b) {
  if (a.src_process != b.src_process || a.dst_process != b.dst_process || a.index != b.index || a.bytes != b.bytes ||
      a.pieces.size() != b.pieces.size()) {
    return false;
  }
  for (size_t i = 0; i < a.pieces.size(); ++i) {
    const MessagePiece &x = a.pieces[i], &y = b.pieces[i];
    if (x.transfer != y.transfer || x.begin != y.begin || x.end != y.end || x.offset != y.offset) return false;
  }
  return true;
}

// Sender and receiver derive the same messages; together they carry every
// cross-process transfer's bytes exactly once, in messages, in the global order.
TEST(MessageSchedule, BothEndsAgreeAndEveryByteTravelsOnce) {
  auto rng = testing::seeded_rng();
  for (int trial = 0; trial < 100; ++trial) {
    const int processes = pick<int>(rng, {2, 3, 4});
    const Topology topology = Topology::uniform(processes * pick<int64_t>(rng, {1, 2, 4}), processes);
    const Shape shape = testing::random_shape(rng, false);
    const Plan plan = make_plan(PlanKey{shape, DType::kBF16, testing::random_sharding(rng, shape, topology, false),
                                        testing::random_sharding(rng, shape, topology, false), topology});
    const uint64_t most = pick<uint64_t>(rng, {1, 7, 64, 4096});
    SCOPED_TRACE(fmt::format("trial {}: messages of {} B", trial, most));
    std::vector<ProcessMessages> schedules;
    for (int p = 0; p < processes; ++p) schedules.push_back(schedule_messages(plan, p, most));

    std::map<size_t, uint64_t> carried;  // transfer -> bytes covered, checked to be in order
    std::map<int, DeviceId> last_source;   // per receiving process: the pair streams source by source
    for (int p = 0; p < processes; ++p) {
      const auto& sends = schedules[static_cast<size_t>(p)].sends;
      last_source.clear();
      for (size_t i = 0; i < sends.size(); ++i) {
        const Message& m = sends[i];
        for (const MessagePiece& piece : m.pieces) {
          const DeviceId src = plan.transfers()[piece.transfer].src;
          const auto [it, first] = last_source.try_emplace(m.dst_process, src);
          EXPECT_LE(it->second, src) << "to process " << m.dst_process << ": a shard's transfers after a later one's";
          it->second = src;
        }
        EXPECT_EQ(m.src_process, p);
        if (i > 0) {
          EXPECT_TRUE(sends[i - 1].comes_before(m, processes));
        }
        EXPECT_GT(m.bytes, 0u);
        EXPECT_LE(m.bytes, most);
        uint64_t offset = 0;
        for (const MessagePiece& piece : m.pieces) {
          EXPECT_EQ(piece.offset, offset);
          EXPECT_EQ(piece.begin, carried[piece.transfer]) << "transfer " << piece.transfer << " out of order";
          carried[piece.transfer] = piece.end;
          offset += piece.end - piece.begin;
        }
        EXPECT_EQ(offset, m.bytes);
        // The receiver expects exactly this message.
        const auto& receives = schedules[static_cast<size_t>(m.dst_process)].receives;
        EXPECT_TRUE(std::any_of(receives.begin(), receives.end(), [&](const Message& r) { return same_message(r, m); }));
      }
      const auto& receives = schedules[static_cast<size_t>(p)].receives;
      for (size_t i = 1; i < receives.size(); ++i) EXPECT_TRUE(receives[i - 1].comes_before(receives[i], processes));
    }
    uint64_t total = 0, received = 0;
    for (const auto& [transfer, bytes] : carried) {
      const Transfer& t = plan.transfers()[transfer];
      EXPECT_NE(topology.process_of(t.src), topology.process_of(t.dst));
      EXPECT_EQ(bytes, static_cast<uint64_t>(t.box.volume()) * 2) << "transfer " << transfer << " not fully carried";
      total += bytes;
    }
    for (const ProcessMessages& s : schedules) {
      for (const Message& m : s.receives) received += m.bytes;
    }
    EXPECT_EQ(total, plan.stats().bytes_cross_process);
    EXPECT_EQ(received, plan.stats().bytes_cross_process);
    if (HasFailure()) break;
  }
}

TEST(MessageSchedule, RejectsAZeroMessageSize) {
  const Topology topology = Topology::uniform(2, 2);
  const NamedSharding a(Mesh({{"x", 2}}, {0, 1}), PartitionSpec({{"x"}}));
  const NamedSharding b(Mesh({{"x", 2}}, {1, 0}), PartitionSpec({{"x"}}));
  const Plan plan = make_plan(PlanKey{{4}, DType::kF32, a, b, topology});
  EXPECT_THROW(schedule_messages(plan, 0, 0), Error);
}

}  // namespace
}  // namespace reshard::execute_detail
