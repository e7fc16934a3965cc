// Randomized reshards between real processes: A to B to A returns A's bytes,
// B holds the right slice everywhere, and exactly the plan's bytes cross
// processes. Every rank draws the same cases from rank 0's seed (printed;
// RESHARD_SEED replays it).
#include <algorithm>
#include <cstring>
#include <iostream>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "execute/support/reference_arrays.h"
#include "mpi_world.h"
#include "reshard/execute/operations.h"
#include "reshard/plan/planner.h"

namespace reshard {
namespace {

using testing::pick;

// The families of layouts the trials cycle through.
enum class Family { kAny, kReplicatedSource, kUneven, kDisjointDevices };

struct Scenario {
  Topology topology;
  Shape shape;
  DType dtype = DType::kF32;
  NamedSharding src;
  NamedSharding dst;
  ExecuteOptions options;

  std::string describe() const {
    return fmt::format("{} processes, {} devices, shape [{}] {}\n  from {}\n  to   {}\n  messages {} B, in flight {} B",
                       topology.num_processes(), topology.num_devices(), fmt::join(shape, ", "), dtype_name(dtype),
                       src.to_string(), dst.to_string(), options.message_bytes, options.max_bytes_in_flight);
  }
};

// `sharding` with its mesh's devices renamed through `ids` (device d -> ids[d]).
NamedSharding on_devices(const NamedSharding& sharding, const std::vector<DeviceId>& ids) {
  std::vector<DeviceId> devices;
  for (DeviceId d : sharding.mesh().devices()) devices.push_back(ids[static_cast<size_t>(d)]);
  return NamedSharding(Mesh(sharding.mesh().axes(), devices), sharding.spec(), sharding.memory_kind(),
                       sharding.uneven());
}

// A mesh over every device, in random order, whose leading axis only
// replicates: each slice lives on several processes.
NamedSharding replicated_across_processes(std::mt19937_64& rng, const Shape& shape, const Topology& topology) {
  const int64_t devices = topology.num_devices();
  const int64_t replicas = topology.num_processes() > 1 ? topology.num_processes() : devices;
  std::vector<DeviceId> order(static_cast<size_t>(devices));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const Mesh mesh({{"replica", replicas}, {"x", devices / replicas}}, order);
  std::vector<SpecEntry> entries(shape.size());
  const size_t dim = std::uniform_int_distribution<size_t>(0, shape.size() - 1)(rng);
  if (rng() % 3 != 0) entries[dim] = SpecEntry{"x"};
  return NamedSharding(mesh, PartitionSpec(std::move(entries)), MemoryKind::kDevice, /*uneven=*/true);
}

Scenario random_scenario(std::mt19937_64& rng, Family family, int processes) {
  const int64_t devices = processes * pick<int64_t>(rng, {1, 2, 3, 4});
  const Topology topology = Topology::uniform(devices, processes);
  const bool uneven = family == Family::kUneven || (family == Family::kAny && rng() % 4 == 0);
  const Shape shape = testing::random_shape(rng, uneven);
  ExecuteOptions options;
  options.threads = 1;  // ranks already outnumber the cores
  options.message_bytes = pick<uint64_t>(rng, {3, 64, 1000, uint64_t{1} << 20});
  options.max_bytes_in_flight = pick<uint64_t>(rng, {1, 200, uint64_t{1} << 20});
  const DType dtype = pick<DType>(rng, {DType::kU8, DType::kBF16, DType::kF32, DType::kF64});
  NamedSharding src = testing::random_sharding(rng, shape, topology, uneven);
  NamedSharding dst = testing::random_sharding(rng, shape, topology, uneven);
  if (family == Family::kReplicatedSource) src = replicated_across_processes(rng, shape, topology);
  if (family == Family::kDisjointDevices && devices >= 2) {
    // Source and target on two disjoint halves of the devices.
    std::vector<DeviceId> order(static_cast<size_t>(devices));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const auto half = static_cast<ptrdiff_t>(devices / 2);
    const std::vector<DeviceId> first(order.begin(), order.begin() + half), second(order.begin() + half, order.end());
    const Topology half_topology = Topology::uniform(half, 1);
    src = on_devices(testing::random_sharding(rng, shape, half_topology, uneven), first);
    dst = on_devices(testing::random_sharding(rng, shape, half_topology, uneven), second);
  }
  return Scenario{topology, shape, dtype, std::move(src), std::move(dst), options};
}

// Whether every process owns at least one of the mesh's devices.
bool on_every_process(const NamedSharding& sharding, const Topology& topology) {
  std::vector<bool> present(static_cast<size_t>(topology.num_processes()), false);
  for (DeviceId d : sharding.mesh().devices()) present[static_cast<size_t>(topology.process_of(d))] = true;
  return std::all_of(present.begin(), present.end(), [](bool p) { return p; });
}

class ReshardRandomMpi : public testing::MpiTest {};

TEST_F(ReshardRandomMpi, RoundTripsAndMovesOnlyWhatThePlanSays) {
  Transport& t = testing::world_transport();
  std::mt19937_64 rng(testing::shared_test_seed());
  const Family families[] = {Family::kAny, Family::kReplicatedSource, Family::kUneven, Family::kDisjointDevices};
  int trials = 0;
  uint64_t cross_process_bytes = 0;
  for (int trial = 0; trial < 48; ++trial, ++trials) {
    const Scenario s = random_scenario(rng, families[trial % 4], t.size());
    const uint64_t salt = rng();
    SCOPED_TRACE(fmt::format("trial {}: {}", trial, s.describe()));
    const ShardedArray a = testing::reference_array(s.shape, s.dtype, s.src, s.topology, t.rank(), salt);
    ShardedArray b = ShardedArray::allocate(s.shape, s.dtype, s.dst, s.topology, t.rank());
    const ExecuteStats there = reshard_into(a, b, t, s.options);
    EXPECT_TRUE(testing::matches_reference(b, salt));
    const ShardedArray back = reshard_array(b, s.src, t, s.options);
    EXPECT_EQ(back.shards().size(), a.shards().size());
    for (size_t i = 0; i < std::min(a.shards().size(), back.shards().size()); ++i) {
      const auto expected = a.shards()[i].buffer.bytes(), actual = back.shards()[i].buffer.bytes();
      EXPECT_TRUE(std::equal(expected.begin(), expected.end(), actual.begin(), actual.end()))
          << "device " << a.shards()[i].device;
    }
    const Plan plan = make_plan(PlanKey{s.shape, s.dtype, s.src, s.dst, s.topology});
    EXPECT_EQ(testing::sum_over_ranks(t, there.bytes_sent), plan.stats().bytes_cross_process);
    EXPECT_EQ(testing::sum_over_ranks(t, there.bytes_received), plan.stats().bytes_cross_process);
    cross_process_bytes += plan.stats().bytes_cross_process;
    if (s.src.is_fully_replicated() && on_every_process(s.src, s.topology)) {
      EXPECT_EQ(plan.stats().bytes_cross_process, 0u);  // every process has every element
    }
    // Stop at the first failure, on every rank together.
    if (testing::sum_over_ranks(t, HasFailure() ? 1 : 0) != 0) break;
  }
  if (t.rank() == 0) {
    std::cout << fmt::format("[ trials   ] {} trials, {} bytes across processes\n", trials, cross_process_bytes);
  }
}

}  // namespace
}  // namespace reshard
