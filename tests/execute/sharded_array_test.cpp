#include "reshard/execute/sharded_array.h"

#include <cstring>

#include <gtest/gtest.h>

#include "execute/support/reference_arrays.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

NamedSharding grid_2x2() {
  return NamedSharding(Mesh({{"x", 2}, {"y", 2}}, {3, 1, 2, 0}), PartitionSpec({{"x"}, {"y"}}));
}

TEST(ShardedArray, HoldsThisProcessDevicesInMeshOrder) {
  const Topology topology = Topology::uniform(4, 2);  // devices 0,1 on process 0; 2,3 on process 1
  const ShardedArray array = ShardedArray::allocate({4, 6}, DType::kF32, grid_2x2(), topology, 1);
  ASSERT_EQ(array.shards().size(), 2u);
  EXPECT_EQ(array.shards()[0].device, 3);  // logical 0: slice [0:2, 0:3]
  EXPECT_EQ(array.shards()[0].box, Box({0, 0}, {2, 3}));
  EXPECT_EQ(array.shards()[1].device, 2);  // logical 2: slice [2:4, 0:3]
  EXPECT_EQ(array.shards()[1].box, Box({2, 0}, {2, 3}));
  EXPECT_EQ(array.shards()[1].buffer.size(), 2u * 3 * 4);
  EXPECT_EQ(array.element_bytes(), 4u);
  EXPECT_THROW(array.shard(0), Error);
}

TEST(ShardedArray, FromFunctionFillsEachShardFromGlobalIndices) {
  const Topology topology = Topology::uniform(4, 1);
  const Shape shape{4, 6};
  const ShardedArray array =
      ShardedArray::from_function(shape, DType::kI32, grid_2x2(), topology, 0, [](std::span<const int64_t> index,
                                                                                    std::span<std::byte> out) {
        const auto value = static_cast<int32_t>(index[0] * 100 + index[1]);
        std::memcpy(out.data(), &value, sizeof value);
      });
  int32_t value = 0;
  const std::vector<int64_t> index{3, 4};
  std::memcpy(&value, array.element(0, index).data(), sizeof value);  // device 0 is logical 3: [2:4, 3:6]
  EXPECT_EQ(value, 304);
  EXPECT_THROW(array.element(3, index), Error);  // device 3 holds [0:2, 0:3]
  EXPECT_TRUE(testing::matches_reference(
      ShardedArray::from_function(shape, DType::kU16, grid_2x2(), topology, 0, testing::reference_elements(shape, 9)),
      9));
}

TEST(ShardedArray, RejectsShardsThatDoNotFitTheLayout) {
  const Topology topology = Topology::uniform(4, 1);
  const NamedSharding sharding = grid_2x2();
  const ShardedArray good = ShardedArray::allocate({4, 6}, DType::kF32, sharding, topology, 0);
  std::vector<Shard> too_few(good.shards().begin(), good.shards().end() - 1);
  EXPECT_THROW(ShardedArray({4, 6}, DType::kF32, sharding, topology, 0, too_few), Error);
  std::vector<Shard> swapped = good.shards();
  std::swap(swapped[0], swapped[1]);
  EXPECT_THROW(ShardedArray({4, 6}, DType::kF32, sharding, topology, 0, swapped), Error);
  std::vector<Shard> short_buffer = good.shards();
  short_buffer[0].buffer = Buffer::allocate(4);
  EXPECT_THROW(ShardedArray({4, 6}, DType::kF32, sharding, topology, 0, short_buffer), Error);
  EXPECT_THROW(ShardedArray::allocate({4, 6}, DType::kF32, sharding, topology, 1), Error);  // no process 1
  EXPECT_THROW(ShardedArray::allocate({5, 6}, DType::kF32, sharding, topology, 0), Error);  // 5 % 2
  try {
    ShardedArray::allocate({4, 6}, DType::kF4, sharding, topology, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
}

TEST(ShardedArray, CopiesShareBuffers) {
  const ShardedArray a = ShardedArray::allocate({4, 6}, DType::kF32, grid_2x2(), Topology::uniform(4, 1), 0);
  const ShardedArray b = a;  // NOLINT(performance-unnecessary-copy-initialization): sharing is the point
  EXPECT_TRUE(b.shards()[0].buffer.shares_memory_with(a.shards()[0].buffer));
}

}  // namespace
}  // namespace reshard
