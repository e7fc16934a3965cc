// The scenario that started the project: [32, 8, 4096] f32 on a 4x4 mesh whose
// device order comes from a TPU slice, 4 processes of 4 devices, moved to a
// mesh with another order, to every host, and to process 0 only.
#include <algorithm>
#include <cctype>

#include <gtest/gtest.h>

#include "execute/support/rank_threads.h"
#include "execute/support/reference_arrays.h"
#include "reshard/execute/operations.h"
#include "reshard/plan/planner.h"

namespace reshard {
namespace {

const Shape kShape{32, 8, 4096};
constexpr uint64_t kSalt = 2024;
constexpr int kProcesses = 4;

Mesh seed_source_mesh() {
  return Mesh({{"data", 4}, {"model", 4}}, {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15});
}

Mesh seed_target_mesh() {
  return Mesh({{"data", 4}, {"model", 4}}, {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15});
}

constexpr uint64_t kElements = 32 * 8 * 4096;

// The elements of the whole array that `process`'s devices hold in `array`'s layout.
uint64_t elements_held_by(const NamedSharding& sharding, const Topology& topology, int process) {
  std::vector<bool> held(static_cast<size_t>(Box::whole(kShape).volume()), false);
  for (const auto& [device, box] : sharding.addressable_index_map(kShape, topology, process)) {
    for (const Run& run : contiguous_runs(Box::whole(kShape), box)) {
      std::fill_n(held.begin() + run.offset, static_cast<size_t>(run.length), true);
    }
  }
  return static_cast<uint64_t>(std::count(held.begin(), held.end(), true));
}

class SeedScenario : public ::testing::TestWithParam<std::string> {
 protected:
  const Topology topology_ = Topology::uniform(16, kProcesses);
  const NamedSharding source_{seed_source_mesh(), PartitionSpec::parse(GetParam())};
  const NamedSharding target_{seed_target_mesh(), PartitionSpec::parse(GetParam())};

  ShardedArray source_on(int process) const {
    return testing::reference_array(kShape, DType::kF32, source_, topology_, process, kSalt);
  }
};

TEST_P(SeedScenario, MovesToTheOtherDeviceOrder) {
  InProcessGroup group(kProcesses);
  testing::run_ranks(group, [&](Transport& t) {
    const ShardedArray moved = reshard_array(source_on(t.rank()), target_, t);
    EXPECT_EQ(moved.shards().size(), 4u);
    EXPECT_TRUE(testing::matches_reference(moved, kSalt));
  });
  const Plan plan = make_plan(PlanKey{kShape, DType::kF32, source_, target_, topology_});
  uint64_t sent = 0;
  for (int p = 0; p < kProcesses; ++p) sent += group.bytes_sent(p);
  EXPECT_EQ(sent, plan.stats().bytes_cross_process);
}

TEST_P(SeedScenario, GathersOnEveryHost) {
  const std::vector<std::byte> expected = testing::reference_host_bytes(kShape, DType::kF32, kSalt);
  InProcessGroup group(kProcesses);
  testing::run_ranks(group, [&](Transport& t) {
    const HostArray host = to_host(source_on(t.rank()), t);
    EXPECT_EQ(host.shape, kShape);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), host.buffer.bytes().begin(), host.buffer.bytes().end()));
  });
  // Each host receives exactly what its own devices lack.
  for (int p = 0; p < kProcesses; ++p) {
    EXPECT_EQ(group.bytes_received(p), (kElements - elements_held_by(source_, topology_, p)) * 4)
        << "process " << p;
  }
}

TEST_P(SeedScenario, GathersOnProcessZeroOnly) {
  const std::vector<std::byte> expected = testing::reference_host_bytes(kShape, DType::kF32, kSalt);
  InProcessGroup group(kProcesses);
  testing::run_ranks(group, [&](Transport& t) {
    const std::optional<HostArray> host = to_host(source_on(t.rank()), t, 0);
    ASSERT_EQ(host.has_value(), t.rank() == 0);
    if (host) {
      EXPECT_TRUE(std::equal(expected.begin(), expected.end(), host->buffer.bytes().begin(), host->buffer.bytes().end()));
    }
  });
  EXPECT_EQ(group.bytes_received(0), (kElements - elements_held_by(source_, topology_, 0)) * 4);
  for (int p = 1; p < kProcesses; ++p) EXPECT_EQ(group.bytes_received(p), 0u) << "process " << p;
  EXPECT_EQ(group.bytes_sent(0), 0u);
}

INSTANTIATE_TEST_SUITE_P(Specs, SeedScenario,
                         ::testing::Values("data,model", "None,None,data", "(data,model)", "model,None,data"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

}  // namespace
}  // namespace reshard
