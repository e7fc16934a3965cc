#include "reshard/layout/sharding.h"

#include <limits>

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "layout/support/printers.h"

namespace reshard {
namespace {

const std::vector<DeviceId> kPermuted = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

NamedSharding sharding(std::vector<MeshAxis> axes, std::string_view spec, bool uneven = false) {
  return NamedSharding(Mesh::with_default_order(std::move(axes)), PartitionSpec::parse(spec), MemoryKind::kDevice,
                       uneven);
}

TEST(NamedSharding, TheReadmeExample) {
  // reshard show --mesh data=4,model=4 --devices 0,4,8,...  --spec 'None,data' --shape 8,4096
  const NamedSharding s(Mesh({{"data", 4}, {"model", 4}}, kPermuted), PartitionSpec::parse("None,data"));
  const Shape shape = {8, 4096};
  EXPECT_EQ(s.shard_shape(shape), (Shape{8, 1024}));
  const std::vector<Box> boxes = s.index_domains(shape);
  const std::vector<int64_t> replicas = s.replica_ids(shape);
  ASSERT_EQ(boxes.size(), 16u);
  for (int64_t logical = 0; logical < 16; ++logical) {
    // Logical device i sits at mesh coordinate (i / 4, i % 4); `data` is the first.
    const int64_t chunk = logical / 4;
    EXPECT_EQ(boxes[static_cast<size_t>(logical)], Box({0, chunk * 1024}, {8, 1024})) << logical;
    EXPECT_EQ(replicas[static_cast<size_t>(logical)], logical % 4) << logical;
  }
  EXPECT_FALSE(s.is_fully_replicated());
}

TEST(NamedSharding, TupleEntriesPutTheFirstAxisFirst) {
  const NamedSharding xy = sharding({{"x", 2}, {"y", 3}}, "(x,y)");
  const NamedSharding yx = sharding({{"x", 2}, {"y", 3}}, "(y,x)");
  const Shape shape = {6};
  const std::vector<Box> by_xy = xy.index_domains(shape);
  const std::vector<Box> by_yx = yx.index_domains(shape);
  for (int64_t logical = 0; logical < 6; ++logical) {
    const int64_t x = logical / 3, y = logical % 3;
    EXPECT_EQ(by_xy[static_cast<size_t>(logical)].origin()[0], x * 3 + y);
    EXPECT_EQ(by_yx[static_cast<size_t>(logical)].origin()[0], y * 2 + x);
  }
}

TEST(NamedSharding, IndivisibleDimensionNamesEverything) {
  const NamedSharding s = sharding({{"x", 4}, {"y", 2}}, "x,y");
  EXPECT_TRUE(testing::throws_error([&] { s.validate({8, 3}); }, ErrorCode::kIndivisible,
                                    {"NamedSharding(mesh=Mesh('x': 4, 'y': 2), spec=PartitionSpec('x', 'y'))",
                                     "dimension 1", "divisible by 2", "equal to 3", "(8, 3)"}));
  EXPECT_TRUE(testing::throws_error([&] { s.index_domains({8, 3}); }, ErrorCode::kIndivisible));
  EXPECT_TRUE(testing::throws_error([&] { s.shard_shape({8, 3}); }, ErrorCode::kIndivisible));
  EXPECT_TRUE(testing::throws_error([&] { s.replica_ids({6, 2}); }, ErrorCode::kIndivisible, {"dimension 0"}));
  EXPECT_TRUE(testing::throws_error([&] { sharding({{"x", 2}}, "x").validate({1}); }, ErrorCode::kIndivisible,
                                    {"(1,)"}));
}

TEST(NamedSharding, SpecErrorsSurfaceThroughEveryQuery) {
  EXPECT_TRUE(testing::throws_error([] { sharding({{"x", 2}}, "y").index_domains({4}); }, ErrorCode::kUnknownAxis));
  EXPECT_TRUE(testing::throws_error([] { sharding({{"x", 2}}, "x,x").shard_shape({4, 4}); },
                                    ErrorCode::kDuplicateAxis));
  EXPECT_TRUE(testing::throws_error([] { sharding({{"x", 2}}, "x").replica_ids({}); }, ErrorCode::kRank));
  EXPECT_TRUE(testing::throws_error([] { sharding({{"x", 2}}, "x").validate({4, -1}); },
                                    ErrorCode::kInvalidArgument, {"negative"}));
}

TEST(NamedSharding, ScalarsAndEmptySpecs) {
  const NamedSharding s = sharding({{"x", 4}}, "");
  EXPECT_EQ(s.shard_shape({}), Shape{});
  const std::vector<Box> boxes = s.index_domains({});
  ASSERT_EQ(boxes.size(), 4u);
  for (const Box& b : boxes) EXPECT_EQ(b, Box::whole({}));
  EXPECT_EQ(s.replica_ids({}), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(NamedSharding, UnevenModeUsesPaddedTiles) {
  const NamedSharding s = sharding({{"x", 4}}, "x", true);
  EXPECT_FALSE(s.shard_shape({10}).has_value());
  EXPECT_EQ(s.index_domains({10}),
            (std::vector<Box>{Box({0}, {3}), Box({3}, {3}), Box({6}, {3}), Box({9}, {1})}));
  EXPECT_EQ(s.index_domains({3}), (std::vector<Box>{Box({0}, {1}), Box({1}, {1}), Box({2}, {1}), Box({3}, {0})}));
  // 5 over 4 leaves tile 2: [0,2) [2,4) [4,5) and an empty last chunk.
  EXPECT_EQ(s.index_domains({5}), (std::vector<Box>{Box({0}, {2}), Box({2}, {2}), Box({4}, {1}), Box({5}, {0})}));
  // Divisible shapes give the same answer as even mode.
  EXPECT_EQ(s.index_domains({8}), sharding({{"x", 4}}, "x").index_domains({8}));
}

TEST(NamedSharding, UnevenTilesNearTheTopOfInt64DoNotOverflow) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<Box> boxes = sharding({{"x", 2}}, "x", true).index_domains({kMax});
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_EQ(boxes[0].interval(0), (Interval{0, int64_t{1} << 62}));
  EXPECT_EQ(boxes[1].interval(0), (Interval{int64_t{1} << 62, kMax}));
  const std::vector<Box> three = sharding({{"x", 3}}, "x", true).index_domains({kMax - 1});
  EXPECT_EQ(three[2].interval(0).end, kMax - 1);
}

TEST(NamedSharding, FullyReplicated) {
  EXPECT_TRUE(sharding({{"x", 4}}, "").is_fully_replicated());
  EXPECT_TRUE(sharding({{"x", 4}, {"one", 1}}, "one").is_fully_replicated());
  EXPECT_TRUE(sharding({{"x", 1}}, "x").is_fully_replicated());
  EXPECT_FALSE(sharding({{"x", 4}}, "None,x").is_fully_replicated());
  EXPECT_FALSE(sharding({{"x", 2}, {"y", 2}}, "(x,y)").is_fully_replicated());
}

TEST(NamedSharding, AddressabilityFollowsTheTopology) {
  const NamedSharding s(Mesh({{"data", 4}, {"model", 4}}, kPermuted), PartitionSpec::parse("None,data"));
  const Topology four_hosts = Topology::uniform(16, 4);
  const Shape shape = {8, 4096};
  EXPECT_FALSE(s.is_fully_addressable(four_hosts, 0));
  EXPECT_TRUE(s.is_fully_addressable(Topology::uniform(16, 1), 0));
  // Process 1 owns devices 4..7, which sit at logical 1, 5, 9, 13 of this mesh.
  const auto mine = s.addressable_index_map(shape, four_hosts, 1);
  const std::vector<Box> all = s.index_domains(shape);
  ASSERT_EQ(mine.size(), 4u);
  const std::vector<DeviceId> ids = {4, 5, 6, 7};
  const std::vector<size_t> logical = {1, 5, 9, 13};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(mine[i].first, ids[i]);
    EXPECT_EQ(mine[i].second, all[logical[i]]);
  }
  EXPECT_TRUE(s.addressable_index_map(shape, four_hosts, 7).empty());
  EXPECT_TRUE(testing::throws_error([&] { s.is_fully_addressable(Topology::uniform(8, 1), 0); },
                                    ErrorCode::kUnknownDevice, {"device 8"}));
}

TEST(NamedSharding, MemoryKindAndRepr) {
  const NamedSharding s = sharding({{"x", 4}}, "x");
  EXPECT_EQ(s.memory_kind(), MemoryKind::kDevice);
  const NamedSharding pinned = s.with_memory_kind(MemoryKind::kPinnedHost);
  EXPECT_EQ(pinned.memory_kind(), MemoryKind::kPinnedHost);
  EXPECT_NE(pinned, s);
  EXPECT_EQ(pinned.index_domains({8}), s.index_domains({8}));  // a memory kind changes no layout
  EXPECT_EQ(s.to_string(), "NamedSharding(mesh=Mesh('x': 4), spec=PartitionSpec('x',))");
  EXPECT_EQ(pinned.to_string(), "NamedSharding(mesh=Mesh('x': 4), spec=PartitionSpec('x',), memory_kind=pinned_host)");
  EXPECT_NE(sharding({{"x", 4}}, "x", true).to_string().find("uneven"), std::string::npos);
}

TEST(NamedSharding, NumChunksIsTheProductOfTheNamedAxes) {
  const NamedSharding s = sharding({{"a", 2}, {"b", 3}, {"c", 5}}, "None,(c,a)");
  EXPECT_EQ(s.num_chunks(3), (std::vector<int64_t>{1, 10, 1}));
}

}  // namespace
}  // namespace reshard
