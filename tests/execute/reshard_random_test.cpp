// Randomized reshards between many layouts and process counts, in-process.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "execute/support/rank_threads.h"
#include "execute/support/reference_arrays.h"
#include "reshard/execute/operations.h"
#include "reshard/plan/planner.h"
#include "support/seed.h"

namespace reshard {
namespace {

using testing::pick;

struct Scenario {
  Topology topology;
  Shape shape;
  DType dtype;
  NamedSharding src;
  NamedSharding dst;
  ExecuteOptions options;

  std::string describe() const {
    return fmt::format("{} processes, {} devices, shape [{}] {}\n  from {}\n  to   {}\n  messages {} B, in flight {} B, "
                       "{} threads",
                       topology.num_processes(), topology.num_devices(), fmt::join(shape, ", "), dtype_name(dtype),
                       src.to_string(), dst.to_string(), options.message_bytes, options.max_bytes_in_flight,
                       options.threads);
  }
};

Scenario random_scenario(std::mt19937_64& rng) {
  const int processes = pick<int>(rng, {1, 2, 3, 4});
  const int64_t devices = processes * pick<int64_t>(rng, {1, 2, 3, 4});
  const Topology topology = Topology::uniform(devices, processes);
  const bool uneven = rng() % 4 == 0;
  const Shape shape = testing::random_shape(rng, uneven);
  ExecuteOptions options;
  options.threads = pick<int>(rng, {1, 2, 3});
  // Tiny messages and windows make messages split transfers and share them.
  options.message_bytes = pick<uint64_t>(rng, {3, 64, 1000, uint64_t{1} << 20});
  options.max_bytes_in_flight = pick<uint64_t>(rng, {1, 200, uint64_t{1} << 20});
  NamedSharding src = testing::random_sharding(rng, shape, topology, uneven);
  NamedSharding dst = testing::random_sharding(rng, shape, topology, uneven);
  if (rng() % 5 == 0) dst = dst.with_memory_kind(MemoryKind::kPinnedHost);
  return Scenario{topology, shape, pick<DType>(rng, {DType::kU8, DType::kBF16, DType::kF32, DType::kF64}),
                  std::move(src), std::move(dst), options};
}

// A to B to A: B holds the right slice everywhere, and A's bytes come back.
TEST(ReshardRandom, RoundTripsAndPlacesEveryElement) {
  auto rng = testing::seeded_rng();
  for (int trial = 0; trial < 120; ++trial) {
    const Scenario s = random_scenario(rng);
    SCOPED_TRACE(fmt::format("trial {}: {}", trial, s.describe()));
    const uint64_t salt = rng();
    InProcessGroup group(s.topology.num_processes(), std::chrono::seconds(20));
    testing::run_ranks(group, [&](Transport& t) {
      const ShardedArray a = testing::reference_array(s.shape, s.dtype, s.src, s.topology, t.rank(), salt);
      const ShardedArray b = reshard_array(a, s.dst, t, s.options);
      EXPECT_EQ(b.sharding(), s.dst);
      EXPECT_TRUE(testing::matches_reference(b, salt));
      const ShardedArray back = reshard_array(b, s.src, t, s.options);
      ASSERT_EQ(back.shards().size(), a.shards().size());
      for (size_t i = 0; i < a.shards().size(); ++i) {
        const auto expected = a.shards()[i].buffer.bytes(), actual = back.shards()[i].buffer.bytes();
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), actual.begin(), actual.end()))
            << "device " << a.shards()[i].device;
      }
    });
    // What crossed processes is exactly what the two plans say must.
    const uint64_t planned = make_plan(PlanKey{s.shape, s.dtype, s.src, s.dst, s.topology}).stats().bytes_cross_process +
                             make_plan(PlanKey{s.shape, s.dtype, s.dst, s.src, s.topology}).stats().bytes_cross_process;
    uint64_t sent = 0, received = 0;
    for (int p = 0; p < s.topology.num_processes(); ++p) {
      sent += group.bytes_sent(p);
      received += group.bytes_received(p);
    }
    EXPECT_EQ(sent, s.src == s.dst ? 0 : planned);
    EXPECT_EQ(received, sent);
    if (HasFailure()) break;
  }
}

// The executor's own counts agree with the plan, process by process.
TEST(ReshardRandom, ExecuteStatsMatchThePlan) {
  auto rng = testing::seeded_rng();
  for (int trial = 0; trial < 40; ++trial) {
    const Scenario s = random_scenario(rng);
    SCOPED_TRACE(fmt::format("trial {}: {}", trial, s.describe()));
    const Plan plan = make_plan(PlanKey{s.shape, s.dtype, s.src, s.dst, s.topology});
    std::vector<ExecuteStats> stats(static_cast<size_t>(s.topology.num_processes()));
    testing::run_ranks(s.topology.num_processes(), [&](Transport& t) {
      const ShardedArray a = testing::reference_array(s.shape, s.dtype, s.src, s.topology, t.rank(), 1);
      ShardedArray b = ShardedArray::allocate(s.shape, s.dtype, s.dst, s.topology, t.rank());
      stats[static_cast<size_t>(t.rank())] = execute(plan, a, b, t, s.options);
      EXPECT_TRUE(testing::matches_reference(b, 1));
    });
    uint64_t copied = 0, sent = 0, received = 0;
    for (const ExecuteStats& st : stats) {
      copied += st.bytes_copied;
      sent += st.bytes_sent;
      received += st.bytes_received;
    }
    EXPECT_EQ(copied, plan.stats().bytes_same_device + plan.stats().bytes_same_process + plan.stats().bytes_fan_out);
    EXPECT_EQ(sent, plan.stats().bytes_cross_process);
    EXPECT_EQ(received, plan.stats().bytes_cross_process);
    uint64_t most_sent = 0;
    for (const ExecuteStats& st : stats) most_sent = std::max(most_sent, st.bytes_sent);
    EXPECT_EQ(most_sent, plan.stats().max_process_send_bytes);
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace reshard
