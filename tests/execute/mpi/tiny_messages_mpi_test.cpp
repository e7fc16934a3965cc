// Thousands of tiny messages between real processes: a 3-byte message size cuts
// each process's shard into thousands of messages to every peer. Between
// processes of one host each such message is a request with control traffic
// of its own (see direct_request.h), and a transport's round of progress
// looks at every pending request: with thousands posted at once, and each
// finished request retired by a round of its own, this reshard of 24 KiB once
// ran for longer than the test's timeout. It must finish, with every byte.
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "execute/support/reference_arrays.h"
#include "mpi_world.h"
#include "reshard/execute/operations.h"
#include "reshard/plan/planner.h"

namespace reshard {
namespace {

class TinyMessagesMpi : public testing::MpiTest {};

TEST_F(TinyMessagesMpi, ThousandsOfMessagesToEveryPeerAllArrive) {
  Transport& t = testing::world_transport();
  const int processes = t.size();
  const Topology topology = Topology::uniform(processes, processes);  // a device each
  const Shape shape{24, 16, 8};
  std::vector<DeviceId> order(static_cast<size_t>(processes));
  std::iota(order.begin(), order.end(), DeviceId{0});
  const std::vector<DeviceId> reversed(order.rbegin(), order.rend());
  // Split over every process's device, then whole on each in reverse order.
  const NamedSharding split(Mesh({{"x", processes}}, order), PartitionSpec({{}, {"x"}}));
  const NamedSharding everywhere(Mesh({{"x", processes}}, reversed), PartitionSpec());
  ExecuteOptions options;
  options.threads = 1;
  options.message_bytes = 3;
  constexpr uint64_t kSalt = 37;

  const ShardedArray a = testing::reference_array(shape, DType::kF64, split, topology, t.rank(), kSalt);
  ShardedArray b = ShardedArray::allocate(shape, DType::kF64, everywhere, topology, t.rank());
  const ExecuteStats stats = reshard_into(a, b, t, options);
  EXPECT_TRUE(testing::matches_reference(b, kSalt));
  const ShardedArray back = reshard_array(b, split, t, options);
  EXPECT_TRUE(testing::matches_reference(back, kSalt));

  // Every process's shard goes to every other process, 3 bytes a message.
  const uint64_t shard_bytes = 24 * 16 * 8 * 8 / static_cast<uint64_t>(processes);
  const auto peers = static_cast<uint64_t>(processes - 1);
  const Plan plan = make_plan(PlanKey{shape, DType::kF64, split, everywhere, topology});
  EXPECT_EQ(plan.stats().bytes_cross_process, shard_bytes * peers * static_cast<uint64_t>(processes));
  EXPECT_EQ(stats.bytes_sent, shard_bytes * peers);
  EXPECT_EQ(stats.messages_sent, (shard_bytes + 2) / 3 * peers);
}

}  // namespace
}  // namespace reshard
