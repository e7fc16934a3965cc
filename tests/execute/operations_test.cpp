// The public operations beyond plain reshards: identity, memory kinds, from host.
#include "reshard/execute/operations.h"

#include <gtest/gtest.h>

#include "execute/support/rank_threads.h"
#include "execute/support/reference_arrays.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

const Shape kShape{8, 6, 4};
constexpr uint64_t kSalt = 77;

class Operations : public ::testing::Test {
 protected:
  const Topology topology_ = Topology::uniform(8, 4);  // two devices per process
  const NamedSharding by_rows_{Mesh({{"x", 4}, {"y", 2}}, {7, 6, 5, 4, 3, 2, 1, 0}), PartitionSpec({{"x"}})};
  const NamedSharding by_columns_{Mesh({{"z", 2}}, {1, 6}), PartitionSpec({{}, {"z"}})};

  ShardedArray source_on(int process) const {
    return testing::reference_array(kShape, DType::kI32, by_rows_, topology_, process, kSalt);
  }
};

TEST_F(Operations, TheSameLayoutMovesNothingAndSharesBuffers) {
  InProcessGroup group(4);
  testing::run_ranks(group, [&](Transport& t) {
    const ShardedArray a = source_on(t.rank());
    const ShardedArray b = reshard_array(a, by_rows_, t);
    ASSERT_EQ(b.shards().size(), a.shards().size());
    for (size_t i = 0; i < a.shards().size(); ++i) {
      EXPECT_TRUE(b.shards()[i].buffer.shares_memory_with(a.shards()[i].buffer));
    }
  });
  for (int p = 0; p < 4; ++p) EXPECT_EQ(group.bytes_sent(p), 0u);
}

TEST_F(Operations, ChangingMemoryKindCopiesEachShardOnItsDevice) {
  const ShardedArray a = source_on(2);
  const ShardedArray pinned = change_memory_kind(a, MemoryKind::kPinnedHost);
  EXPECT_EQ(pinned.sharding().memory_kind(), MemoryKind::kPinnedHost);
  EXPECT_EQ(pinned.sharding().mesh(), a.sharding().mesh());
  EXPECT_EQ(pinned.sharding().spec(), a.sharding().spec());
  ASSERT_EQ(pinned.shards().size(), a.shards().size());
  for (size_t i = 0; i < a.shards().size(); ++i) {
    EXPECT_EQ(pinned.shards()[i].device, a.shards()[i].device);
    EXPECT_EQ(pinned.shards()[i].box, a.shards()[i].box);
    EXPECT_FALSE(pinned.shards()[i].buffer.shares_memory_with(a.shards()[i].buffer));
  }
  EXPECT_TRUE(testing::matches_reference(pinned, kSalt));
  const ShardedArray same = change_memory_kind(a, MemoryKind::kDevice);
  EXPECT_TRUE(same.shards()[0].buffer.shares_memory_with(a.shards()[0].buffer));
}

TEST_F(Operations, ReshardToAnotherMemoryKindStaysOnEachDevice) {
  InProcessGroup group(4);
  testing::run_ranks(group, [&](Transport& t) {
    const ShardedArray moved = reshard_array(source_on(t.rank()), by_rows_.with_memory_kind(MemoryKind::kUnpinnedHost), t);
    EXPECT_EQ(moved.sharding().memory_kind(), MemoryKind::kUnpinnedHost);
    EXPECT_TRUE(testing::matches_reference(moved, kSalt));
  });
  for (int p = 0; p < 4; ++p) EXPECT_EQ(group.bytes_sent(p), 0u);
}

TEST_F(Operations, FromHostEverywhereCopiesLocallyOnly) {
  const std::vector<std::byte> host = testing::reference_host_bytes(kShape, DType::kI32, kSalt);
  InProcessGroup group(4);
  testing::run_ranks(group, [&](Transport& t) {
    const ShardedArray placed = from_host(HostView{kShape, DType::kI32, host}, by_columns_, topology_, t);
    EXPECT_EQ(placed.topology(), topology_);
    EXPECT_EQ(placed.shards().size(), t.rank() == 0 || t.rank() == 3 ? 1u : 0u);
    EXPECT_TRUE(testing::matches_reference(placed, kSalt));
  });
  for (int p = 0; p < 4; ++p) EXPECT_EQ(group.bytes_sent(p), 0u);
}

TEST_F(Operations, FromHostOnRootSendsEachProcessOnlyItsShards) {
  const std::vector<std::byte> host = testing::reference_host_bytes(kShape, DType::kI32, kSalt);
  InProcessGroup group(4);
  testing::run_ranks(group, [&](Transport& t) {
    const HostView view{kShape, DType::kI32, t.rank() == 1 ? std::span<const std::byte>(host) : std::span<const std::byte>()};
    const ShardedArray placed = from_host(view, 1, by_rows_, topology_, t);
    EXPECT_TRUE(testing::matches_reference(placed, kSalt));
  });
  // [2, 6, 4] i32 per device; a process's two devices hold the same rows, which
  // cross into it once (stage 1 copies them to the other device).
  const uint64_t shard_bytes = 2 * 6 * 4 * 4;
  for (int p = 0; p < 4; ++p) {
    EXPECT_EQ(group.bytes_received(p), p == 1 ? 0 : shard_bytes) << "process " << p;
  }
  EXPECT_EQ(group.bytes_sent(1), 3 * shard_bytes);
}

TEST_F(Operations, HostBytesOfTheWrongSizeAreAnErrorOnEveryProcess) {
  const std::vector<std::byte> short_host(10);
  EXPECT_THROW(testing::run_ranks(4,
                                  [&](Transport& t) {
                                    from_host(HostView{kShape, DType::kI32, short_host}, by_rows_, topology_, t);
                                  }),
               Error);
  EXPECT_THROW(testing::run_ranks(4, [&](Transport& t) { to_host(source_on(t.rank()), t, 4); }), Error);
}

}  // namespace
}  // namespace reshard
