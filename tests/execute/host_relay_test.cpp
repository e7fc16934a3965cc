// Plans whose processes share hosts: stage 2 relays what crossed into a host
// once to the host's other processes, threads standing in for processes.
#include <map>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "execute/support/rank_threads.h"
#include "execute/support/reference_arrays.h"
#include "reshard/execute/executor.h"
#include "reshard/plan/planner.h"
#include "support/seed.h"

namespace reshard {
namespace {

using testing::pick;

// Processes on fewer hosts than processes, at random, renumbered 0..H-1 by first process.
Topology random_hosts(const Topology& topology, std::mt19937_64& rng) {
  const auto hosts = 1 + rng() % static_cast<uint64_t>(topology.num_processes() - 1);
  std::vector<int> host_of(static_cast<size_t>(topology.num_processes()));
  std::map<uint64_t, int> renumbered;
  for (int& host : host_of) host = renumbered.try_emplace(rng() % hosts, static_cast<int>(renumbered.size())).first->second;
  return topology.with_hosts(host_of);
}

TEST(HostRelay, EveryElementArrivesAndOnlyThePlannedBytesMove) {
  auto rng = testing::seeded_rng();
  int relayed = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const int processes = pick<int>(rng, {2, 3, 4});
    const Topology plain = Topology::uniform(processes * pick<int64_t>(rng, {1, 2, 3}), processes);
    const Topology topology = random_hosts(plain, rng);
    const bool uneven = rng() % 4 == 0;
    const Shape shape = testing::random_shape(rng, uneven);
    const NamedSharding src = testing::random_sharding(rng, shape, plain, uneven);
    // Replicated targets are what relays serve: every other one is.
    std::vector<DeviceId> every_device(static_cast<size_t>(plain.num_devices()));
    for (size_t d = 0; d < every_device.size(); ++d) every_device[d] = static_cast<DeviceId>(d);
    const NamedSharding dst =
        trial % 2 == 0 ? NamedSharding(Mesh({{"all", plain.num_devices()}}, every_device), PartitionSpec())
                       : testing::random_sharding(rng, shape, plain, uneven);
    const DType dtype = pick<DType>(rng, {DType::kU8, DType::kBF16, DType::kF32});
    ExecuteOptions options;
    options.message_bytes = pick<uint64_t>(rng, {3, 64, uint64_t{1} << 20});
    options.max_bytes_in_flight = pick<uint64_t>(rng, {1, 200, uint64_t{1} << 20});
    const Plan plan = make_plan(PlanKey{shape, dtype, src, dst, topology});
    SCOPED_TRACE(fmt::format("trial {}: {} processes on {} hosts, shape [{}] {}\n  from {}\n  to   {}", trial,
                             processes, topology.num_hosts(), fmt::join(shape, ", "), dtype_name(dtype),
                             src.to_string(), dst.to_string()));
    ASSERT_NO_THROW(plan.validate());
    relayed += plan.stats().bytes_host_relay > 0;
    const uint64_t salt = rng();
    std::vector<ExecuteStats> stats(static_cast<size_t>(processes));
    testing::run_ranks(processes, [&](Transport& t) {
      // The arrays may know hosts or not: only the processes must match.
      const ShardedArray a = testing::reference_array(shape, dtype, src, plain, t.rank(), salt);
      ShardedArray b = ShardedArray::allocate(shape, dtype, dst, trial % 3 == 0 ? topology : plain, t.rank());
      stats[static_cast<size_t>(t.rank())] = execute(plan, a, b, t, options);
      EXPECT_TRUE(testing::matches_reference(b, salt));
    });
    uint64_t sent = 0, received = 0, copied = 0;
    for (const ExecuteStats& s : stats) {
      sent += s.bytes_sent;
      received += s.bytes_received;
      copied += s.bytes_copied;
    }
    EXPECT_EQ(sent, plan.stats().bytes_cross_process + plan.stats().bytes_host_relay);
    EXPECT_EQ(received, sent);
    EXPECT_EQ(copied, plan.stats().bytes_same_device + plan.stats().bytes_same_process + plan.stats().bytes_fan_out);
    if (HasFailure()) break;
  }
  EXPECT_GT(relayed, 2);  // 6 to 17 in 120 over 24 seeds
}

}  // namespace
}  // namespace reshard
