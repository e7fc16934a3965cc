#include "reshard/layout/best_effort.h"

#include <numeric>
#include <random>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "layout/support/printers.h"
#include "support/seed.h"

namespace reshard {
namespace {

Shape random_shape(std::mt19937_64& rng) {
  static constexpr int64_t kDims[] = {0, 1, 2, 3, 4, 6, 7, 8, 12, 16, 24, 100, 128, 4096, 11008};
  Shape shape(rng() % 5);
  for (int64_t& s : shape) s = kDims[rng() % std::size(kDims)];
  return shape;
}

TEST(BestEffortWithMesh, ShardsTheLastDivisibleDimension) {
  const Mesh mesh = Mesh::with_default_order({{"data", 4}, {"model", 2}});
  EXPECT_EQ(best_effort_sharding({8, 12, 6}, mesh, "data").spec(), PartitionSpec::parse("None,data"));
  EXPECT_EQ(best_effort_sharding({8, 6}, mesh, "data").spec(), PartitionSpec::parse("data"));
  EXPECT_EQ(best_effort_sharding({8, 6}, mesh, "model").spec(), PartitionSpec::parse("None,model"));
  EXPECT_EQ(best_effort_sharding({3, 5}, mesh, "data").spec(), PartitionSpec());  // replicate
  EXPECT_EQ(best_effort_sharding({}, mesh, "data").spec(), PartitionSpec());
  EXPECT_EQ(best_effort_sharding({8, 6}, mesh, "data").mesh(), mesh);
}

TEST(BestEffortWithMesh, UnknownAxis) {
  const Mesh mesh = Mesh::with_default_order({{"data", 4}});
  EXPECT_TRUE(testing::throws_error([&] { best_effort_sharding({8}, mesh, "fsdp"); }, ErrorCode::kUnknownAxis,
                                    {"'fsdp'", "'data': 4"}));
}

TEST(BestEffortWithMesh, RandomShapesFollowTheRule) {
  std::mt19937_64 rng = testing::seeded_rng();
  const Mesh mesh({{"replica", 2}, {"data", 4}, {"model", 3}}, [] {
    std::vector<DeviceId> ids(24);
    std::iota(ids.rbegin(), ids.rend(), DeviceId{0});
    return ids;
  }());
  for (int trial = 0; trial < 200; ++trial) {
    const Shape shape = random_shape(rng);
    const std::string axis = trial % 2 == 0 ? "data" : "model";
    const int64_t size = axis == "data" ? 4 : 3;
    const NamedSharding s = best_effort_sharding(shape, mesh, axis);
    std::vector<SpecEntry> want(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
      if (shape[d] % size == 0) {
        want[d] = {axis};
        break;
      }
    }
    EXPECT_EQ(s.spec(), PartitionSpec(want));
    EXPECT_EQ(s.mesh(), mesh);
    EXPECT_NO_THROW(s.validate(shape));
  }
}

TEST(BestEffortWithoutMesh, SpreadsAsMuchAsDivisibilityAllows) {
  const std::vector<DeviceId> eight = {7, 6, 5, 4, 3, 2, 1, 0};
  // (12, 6) over 8: the last dimension takes gcd(6, 8) = 2, the first gcd(12, 4) = 4.
  const NamedSharding s = best_effort_sharding({12, 6}, eight);
  EXPECT_EQ(s.mesh(), Mesh({{"d0", 4}, {"d1", 2}}, eight));
  EXPECT_EQ(s.spec(), PartitionSpec::parse("d0,d1"));
  // (3, 5) over 8: nothing divides, all 8 devices replicate.
  const NamedSharding replicated = best_effort_sharding({3, 5}, eight);
  EXPECT_EQ(replicated.mesh(), Mesh({{"replica", 8}}, eight));
  EXPECT_TRUE(replicated.is_fully_replicated());
  // (6,) over 4: 2 devices split the dimension, 2 replicas of that.
  const NamedSharding partial = best_effort_sharding({6}, {0, 1, 2, 3});
  EXPECT_EQ(partial.mesh(), Mesh({{"replica", 2}, {"d0", 2}}, {0, 1, 2, 3}));
  EXPECT_EQ(partial.spec(), PartitionSpec::parse("d0"));
  // An empty dimension divides evenly over any count: gcd(0, n) = n.
  EXPECT_EQ(best_effort_sharding({5, 0}, {0, 1, 2}).spec(), PartitionSpec::parse("None,d1"));
  EXPECT_TRUE(testing::throws_error([] { best_effort_sharding({4}, std::vector<DeviceId>{}); },
                                    ErrorCode::kInvalidArgument));
}

TEST(BestEffortWithoutMesh, RandomShapesFollowTheGcdWalk) {
  std::mt19937_64 rng = testing::seeded_rng();
  for (int trial = 0; trial < 200; ++trial) {
    const Shape shape = random_shape(rng);
    std::vector<DeviceId> devices(1 + rng() % 64);
    std::iota(devices.begin(), devices.end(), DeviceId{0});
    std::shuffle(devices.begin(), devices.end(), rng);
    const NamedSharding s = best_effort_sharding(shape, devices);
    // Reference: last to first, gcd with what is still unassigned.
    auto remaining = static_cast<int64_t>(devices.size());
    std::vector<int64_t> split(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
      split[d] = std::gcd(shape[d], remaining);
      remaining /= split[d];
    }
    std::vector<MeshAxis> axes;
    std::vector<SpecEntry> spec(shape.size());
    if (remaining > 1) axes.push_back({"replica", remaining});
    for (size_t d = 0; d < shape.size(); ++d) {
      if (split[d] > 1) {
        axes.push_back({fmt::format("d{}", d), split[d]});
        spec[d] = {axes.back().name};
      }
    }
    ASSERT_EQ(s.mesh(), Mesh(axes, devices));
    ASSERT_EQ(s.spec(), PartitionSpec(spec));
    // Valid for the shape, and as spread out as the walk allows.
    const std::vector<Box> boxes = s.index_domains(shape);
    std::set<std::pair<std::vector<int64_t>, Shape>> distinct;
    for (const Box& b : boxes) distinct.insert({b.origin(), b.shape()});
    if (!Box::whole(shape).empty()) {
      EXPECT_EQ(static_cast<int64_t>(distinct.size()), static_cast<int64_t>(devices.size()) / remaining);
    }
  }
}

}  // namespace
}  // namespace reshard
