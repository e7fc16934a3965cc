#include "reshard/layout/topology.h"

#include "reshard/layout/sharding.h"

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"

namespace reshard {
namespace {

TEST(Topology, UniformFollowsTheFloorRule) {
  // Device d belongs to process floor(d / (T / P)).
  for (int64_t t : {1, 4, 16, 24}) {
    for (int p = 1; p <= t; ++p) {
      if (t % p != 0) continue;
      const Topology topology = Topology::uniform(t, p);
      EXPECT_EQ(topology.num_devices(), t);
      EXPECT_EQ(topology.num_processes(), p);
      for (DeviceId d = 0; d < t; ++d) {
        EXPECT_EQ(topology.process_of(d), d / (t / p)) << "T=" << t << " P=" << p << " d=" << d;
      }
    }
  }
}

TEST(Topology, UniformExample) {
  const Topology topology = Topology::uniform(16, 4);
  EXPECT_EQ(topology.devices_of(0), (std::vector<DeviceId>{0, 1, 2, 3}));
  EXPECT_EQ(topology.devices_of(3), (std::vector<DeviceId>{12, 13, 14, 15}));
  EXPECT_TRUE(topology.devices_of(4).empty());
  EXPECT_EQ(topology.process_of(5), 1);
  const Device device = topology.device(9);
  EXPECT_EQ(device.id, 9);
  EXPECT_EQ(device.process, 2);
  EXPECT_EQ(device.platform, "cpu");
  EXPECT_TRUE(topology.contains(15));
  EXPECT_FALSE(topology.contains(16));
  EXPECT_FALSE(topology.contains(-1));
}

TEST(Topology, UniformRejectsBadCounts) {
  EXPECT_TRUE(testing::throws_error([] { Topology::uniform(0, 1); }, ErrorCode::kInvalidArgument, {"0 devices"}));
  EXPECT_TRUE(testing::throws_error([] { Topology::uniform(4, 0); }, ErrorCode::kInvalidArgument, {"0 processes"}));
  EXPECT_TRUE(testing::throws_error([] { Topology::uniform(-4, 1); }, ErrorCode::kInvalidArgument));
  EXPECT_TRUE(testing::throws_error([] { Topology::uniform(10, 4); }, ErrorCode::kInvalidArgument, {"10", "4"}));
}

TEST(Topology, UnknownDevicesAreTypedErrors) {
  const Topology topology = Topology::uniform(8, 2);
  EXPECT_TRUE(testing::throws_error([&] { topology.process_of(8); }, ErrorCode::kUnknownDevice, {"8", "0..7"}));
  EXPECT_TRUE(testing::throws_error([&] { topology.process_of(-1); }, ErrorCode::kUnknownDevice, {"-1"}));
  EXPECT_TRUE(testing::throws_error([&] { topology.device(100); }, ErrorCode::kUnknownDevice));
}

TEST(Topology, ExplicitProcesses) {
  const Topology topology = Topology::explicit_processes({1, 0, 1, 2, 0});
  EXPECT_EQ(topology.num_processes(), 3);
  EXPECT_EQ(topology.num_devices(), 5);
  EXPECT_EQ(topology.devices_of(0), (std::vector<DeviceId>{1, 4}));
  EXPECT_EQ(topology.devices_of(1), (std::vector<DeviceId>{0, 2}));
  EXPECT_EQ(topology.process_of(3), 2);
  EXPECT_EQ(Topology::explicit_processes({0, 0, 1, 1}), Topology::uniform(4, 2));
}

TEST(Topology, ExplicitProcessesRejectsGapsAndBadIds) {
  EXPECT_TRUE(testing::throws_error([] { Topology::explicit_processes({}); }, ErrorCode::kInvalidArgument));
  EXPECT_TRUE(testing::throws_error([] { Topology::explicit_processes({0, 2, 2}); }, ErrorCode::kInvalidArgument,
                                    {"process 1"}));
  EXPECT_TRUE(testing::throws_error([] { Topology::explicit_processes({0, -1}); }, ErrorCode::kInvalidArgument,
                                    {"device 1", "-1"}));
  // Neither may become an allocation sized by the bad id.
  EXPECT_TRUE(testing::throws_error([] { Topology::explicit_processes({-5}); }, ErrorCode::kInvalidArgument));
  EXPECT_TRUE(testing::throws_error([] { Topology::explicit_processes({0, 2000000000}); },
                                    ErrorCode::kInvalidArgument, {"2000000000"}));
}

TEST(Topology, AMeshLargerThanTheTopologyNamesTheDevicesItLacksAndTheTopologysSize) {
  const Topology topology = Topology::uniform(4, 2);
  std::vector<DeviceId> sixteen(16);
  for (DeviceId d = 0; d < 16; ++d) sixteen[static_cast<size_t>(d)] = 15 - d;
  EXPECT_TRUE(testing::throws_error([&] { topology.check_contains(sixteen, "the mesh"); }, ErrorCode::kUnknownDevice,
                                    {"the mesh names devices the topology lacks: 15, 14, 13", "8, ... (12 in all)",
                                     "the topology has 4 devices (0..3)"}));
  const std::vector<DeviceId> one_far = {0, 1, 9};
  EXPECT_TRUE(testing::throws_error([&] { topology.check_contains(one_far, "the mesh"); }, ErrorCode::kUnknownDevice,
                                    {"lacks: 9;"}));
  topology.check_contains(std::vector<DeviceId>{3, 0, 2}, "the mesh");  // all there: no error
}

TEST(MemoryKind, NamesRoundTrip) {
  for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost, MemoryKind::kUnpinnedHost}) {
    EXPECT_EQ(memory_kind_from_string(memory_kind_name(kind)), kind);
  }
  EXPECT_EQ(memory_kind_name(MemoryKind::kPinnedHost), "pinned_host");
  EXPECT_TRUE(testing::throws_error([] { memory_kind_from_string("gpu"); }, ErrorCode::kParse, {"'gpu'"}));
}

TEST(Topology, TheDefaultCoversEveryMeshesLargestDeviceOverTheProcesses) {
  const NamedSharding small(Mesh({{"x", 2}}, {1, 0}), PartitionSpec());
  const NamedSharding large(Mesh({{"x", 4}}, {7, 3, 5, 1}), PartitionSpec());
  EXPECT_EQ(default_topology(std::vector{small, large}, 2), Topology::uniform(8, 2));
  EXPECT_EQ(default_topology(std::vector{small}, 1), Topology::uniform(2, 1));
  EXPECT_EQ(default_topology({}, 1), Topology::uniform(1, 1));
  EXPECT_TRUE(testing::throws_error([&] { (void)default_topology(std::vector{large}, 3); },
                                    ErrorCode::kInvalidArgument, {"8 devices", "3 processes", "give a topology"}));
}

}  // namespace
}  // namespace reshard
