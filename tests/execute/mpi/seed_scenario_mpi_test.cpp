// The scenario that started the project, with real processes: [32, 8, 4096]
// f32 on 16 devices, the 4x4 mesh in a TPU slice's device order, moved to
// another device order, to every host, and to process 0 only. At 4 ranks that
// is 4 processes of 4 devices; every rank checks its own bytes.
#include <algorithm>
#include <cctype>
#include <cstring>

#include <gtest/gtest.h>

#include "execute/support/reference_arrays.h"
#include "mpi_world.h"
#include "reshard/execute/operations.h"
#include "reshard/plan/planner.h"

namespace reshard {
namespace {

const Shape kShape{32, 8, 4096};
constexpr uint64_t kSalt = 2024;

Mesh seed_source_mesh() {
  return Mesh({{"data", 4}, {"model", 4}}, {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15});
}

Mesh seed_target_mesh() {
  return Mesh({{"data", 4}, {"model", 4}}, {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15});
}

bool equal_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

class SeedScenarioMpi : public testing::MpiTest, public ::testing::WithParamInterface<std::string> {
 protected:
  Transport& t_ = testing::world_transport();
  const Topology topology_ = Topology::uniform(16, t_.size());
  const NamedSharding source_{seed_source_mesh(), PartitionSpec::parse(GetParam())};
  const NamedSharding target_{seed_target_mesh(), PartitionSpec::parse(GetParam())};

  ShardedArray source() const {
    return testing::reference_array(kShape, DType::kF32, source_, topology_, t_.rank(), kSalt);
  }
};

TEST_P(SeedScenarioMpi, MovesToTheOtherDeviceOrder) {
  ShardedArray moved = ShardedArray::allocate(kShape, DType::kF32, target_, topology_, t_.rank());
  const ExecuteStats stats = reshard_into(source(), moved, t_);
  EXPECT_EQ(moved.shards().size(), static_cast<size_t>(16 / t_.size()));
  EXPECT_TRUE(testing::matches_reference(moved, kSalt));
  // What crossed processes is what the plan says must, no more.
  const Plan plan = make_plan(PlanKey{kShape, DType::kF32, source_, target_, topology_});
  EXPECT_EQ(testing::sum_over_ranks(t_, stats.bytes_sent), plan.stats().bytes_cross_process);
  EXPECT_EQ(testing::sum_over_ranks(t_, stats.bytes_received), plan.stats().bytes_cross_process);
}

TEST_P(SeedScenarioMpi, GathersOnEveryHost) {
  const std::vector<std::byte> expected = testing::reference_host_bytes(kShape, DType::kF32, kSalt);
  const HostArray host = to_host(source(), t_);
  EXPECT_EQ(host.shape, kShape);
  EXPECT_TRUE(equal_bytes(expected, host.buffer.bytes()));
}

TEST_P(SeedScenarioMpi, GathersOnProcessZeroOnly) {
  const std::vector<std::byte> expected = testing::reference_host_bytes(kShape, DType::kF32, kSalt);
  const std::optional<HostArray> host = to_host(source(), t_, 0);
  EXPECT_EQ(host.has_value(), t_.rank() == 0);
  if (host) {
    EXPECT_TRUE(equal_bytes(expected, host->buffer.bytes()));
  }
}

TEST_P(SeedScenarioMpi, ComesBackFromProcessZerosHost) {
  // The way back: the whole array on process 0 only, each process receiving
  // just its shards.
  const std::vector<std::byte> whole =
      t_.rank() == 0 ? testing::reference_host_bytes(kShape, DType::kF32, kSalt) : std::vector<std::byte>{};
  const ShardedArray placed = from_host(HostView{kShape, DType::kF32, whole}, 0, target_, topology_, t_);
  EXPECT_TRUE(testing::matches_reference(placed, kSalt));
}

class SeedReplicatedMpi : public testing::MpiTest {};

TEST_F(SeedReplicatedMpi, BecomesReplicatedOnEveryDevice) {
  // The seed's own request: `data,None,model` made replicated on all 16
  // devices. Every rank checks every byte of its copies, and the transports
  // count what really crossed processes: the plan's bytes.
  Transport& t = testing::world_transport();
  const Topology topology = Topology::uniform(16, t.size());
  const NamedSharding source(seed_source_mesh(), PartitionSpec::parse("data,None,model"));
  const NamedSharding replicated(seed_source_mesh(), PartitionSpec());
  const TransportCounters before = t.counters();
  const ShardedArray moved =
      reshard_array(testing::reference_array(kShape, DType::kF32, source, topology, t.rank(), kSalt), replicated, t);
  const TransportCounters after = t.counters();
  EXPECT_TRUE(testing::matches_reference(moved, kSalt));
  EXPECT_EQ(moved.shards().size(), static_cast<size_t>(16 / t.size()));
  const Plan plan = make_plan(PlanKey{kShape, DType::kF32, source, replicated, topology});
  const uint64_t sent = testing::sum_over_ranks(t, after.bytes_sent - before.bytes_sent);
  EXPECT_EQ(sent, plan.stats().bytes_cross_process);
  EXPECT_EQ(testing::sum_over_ranks(t, after.bytes_received - before.bytes_received), plan.stats().bytes_cross_process);
  if (t.size() == 4) {
    // Each process lacks 3 of the array's 4 MiB and receives them once,
    // however many of its devices need them: 12 MiB in all, not 48.
    EXPECT_EQ(sent, uint64_t{12} << 20);
  }
}

INSTANTIATE_TEST_SUITE_P(Specs, SeedScenarioMpi,
                         // Sharded on both axes, across the minor dimension, and replicated (the
                         // in-process suite covers more specs; these keep the job short).
                         ::testing::Values("data,model", "model,None,data", ""),
                         [](const auto& param_info) {
                           std::string name = param_info.param.empty() ? "replicated" : param_info.param;
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

}  // namespace
}  // namespace reshard
