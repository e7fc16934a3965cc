// A replicated array moved from the devices of some processes to those of others: the holders share
// the sending, and every byte arrives.
#include <cstring>

#include <gtest/gtest.h>

#include "execute/support/reference_arrays.h"
#include "mpi_world.h"
#include "reshard/execute/operations.h"
#include "reshard/plan/planner.h"

namespace reshard {
namespace {

// 16 MiB of f32, so that splitting it between holders is visible in the counts.
const Shape kShape{1024, 4096};

std::vector<uint64_t> gather_counts(Transport& t, uint64_t value) {
  std::vector<std::byte> mine(sizeof value);
  std::memcpy(mine.data(), &value, sizeof value);
  std::vector<uint64_t> all;
  for (const auto& theirs : t.all_gather(mine)) {
    uint64_t v = 0;
    std::memcpy(&v, theirs.data(), sizeof v);
    all.push_back(v);
  }
  return all;
}

class ReplicatedMoveMpi : public testing::MpiTest {};

// 8 devices; replicated on the first half of them, to be replicated on the
// second half. At 4 ranks that is processes 0 and 1 sending to 2 and 3.
TEST_F(ReplicatedMoveMpi, EachHolderSendsAboutHalf) {
  Transport& t = testing::world_transport();
  const Topology topology = Topology::uniform(8, t.size());
  const NamedSharding first_half(Mesh({{"r", 4}}, {0, 1, 2, 3}), PartitionSpec());
  const NamedSharding second_half(Mesh({{"r", 4}}, {4, 5, 6, 7}), PartitionSpec());
  const ShardedArray source = testing::reference_array(kShape, DType::kF32, first_half, topology, t.rank(), 77);
  const TransportCounters before = t.counters();
  const ShardedArray moved = reshard_array(source, second_half, t);
  const TransportCounters after = t.counters();
  EXPECT_TRUE(testing::matches_reference(moved, 77));
  const std::vector<uint64_t> sent = gather_counts(t, after.bytes_sent - before.bytes_sent);
  uint64_t total = 0;
  for (uint64_t s : sent) total += s;
  const Plan plan = make_plan(PlanKey{kShape, DType::kF32, first_half, second_half, topology});
  EXPECT_EQ(total, plan.stats().bytes_cross_process);
  if (t.size() == 4) {
    const uint64_t array_bytes = uint64_t{16} << 20;
    EXPECT_EQ(total, 2 * array_bytes);  // each receiving process gets the array once
    for (int holder = 0; holder < 2; ++holder) {
      const double share = static_cast<double>(sent[static_cast<size_t>(holder)]) / static_cast<double>(total);
      EXPECT_NEAR(share, 0.5, 0.05) << "process " << holder << " sent " << sent[static_cast<size_t>(holder)];
    }
    EXPECT_EQ(sent[2] + sent[3], 0u);
  }
}

}  // namespace
}  // namespace reshard
