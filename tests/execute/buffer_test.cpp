// Buffers: allocated, adopted with an owner kept alive, or read-only and never written through.
#include "reshard/execute/buffer.h"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "execute/support/rank_threads.h"
#include "execute/support/reference_arrays.h"
#include "reshard/execute/operations.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

// Memory a caller owns (a numpy array, say): whether it is still alive.
struct CallerMemory {
  std::vector<std::byte> bytes;
  std::shared_ptr<bool> freed = std::make_shared<bool>(false);
  ~CallerMemory() { *freed = true; }
};

ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kParse;  // "no error": not a code these calls throw
}

TEST(Buffer, AdoptedMemoryStaysAliveAsLongAsAnyCopy) {
  auto memory = std::make_shared<CallerMemory>();
  memory->bytes.resize(64, std::byte{7});
  const std::shared_ptr<bool> freed = memory->freed;
  Buffer copy;
  {
    Buffer adopted = Buffer::adopt(memory->bytes, memory);
    memory.reset();  // the caller lets go; the buffer holds its owner
    EXPECT_TRUE(adopted.writable());
    adopted.data()[0] = std::byte{9};
    copy = adopted;
  }
  EXPECT_FALSE(*freed) << "freed while a copy of the buffer was alive";
  EXPECT_EQ(copy.bytes()[0], std::byte{9});
  EXPECT_EQ(std::as_const(copy).bytes()[1], std::byte{7});
  copy = Buffer();
  EXPECT_TRUE(*freed) << "the owner outlived every copy";
}

TEST(Buffer, ReadOnlyBuffersAndTheirCopiesNeverHandOutWritablePointers) {
  const std::vector<std::byte> mapped(32, std::byte{1});
  for (Buffer buffer : {Buffer::borrow(mapped), Buffer::adopt_read_only(mapped, std::make_shared<int>(0))}) {
    Buffer copy = buffer;
    EXPECT_FALSE(copy.writable());
    EXPECT_EQ(code_of([&] { (void)copy.data(); }), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code_of([&] { (void)copy.bytes(); }), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::as_const(copy).data(), mapped.data());  // reading is fine
    EXPECT_TRUE(copy.shares_memory_with(buffer));
  }
  EXPECT_TRUE(Buffer::allocate(8).writable());
}

TEST(Buffer, ANoOpReshardOfReadOnlyShardsReturnsReadOnlyShards) {
  // A no-op reshard returns the same buffers: writing into the result must
  // not reach the read-only memory (a memory-mapped file, say).
  const Topology one = Topology::uniform(2, 1);
  const NamedSharding rows(Mesh({{"x", 2}}, {0, 1}), PartitionSpec({{"x"}}));
  const std::vector<std::byte> file(2 * 8 * 4, std::byte{3});
  std::vector<Shard> shards;
  for (size_t i = 0; i < 2; ++i) {
    shards.push_back(Shard{static_cast<DeviceId>(i), Box({static_cast<int64_t>(i), 0}, {1, 8}),
                           Buffer::borrow(std::span(file).subspan(i * 32, 32))});
  }
  const ShardedArray mapped({2, 8}, DType::kF32, rows, one, 0, std::move(shards));
  InProcessGroup group(1);
  ShardedArray same = reshard_array(mapped, rows, group.transport(0));
  EXPECT_TRUE(same.shards()[0].buffer.shares_memory_with(mapped.shards()[0].buffer));
  EXPECT_EQ(code_of([&] { (void)same.writable_bytes(0); }), ErrorCode::kInvalidArgument);
  // Moved elsewhere, the result is fresh memory and writable.
  const NamedSharding swapped(Mesh({{"x", 2}}, {1, 0}), PartitionSpec({{"x"}}));
  ShardedArray moved = reshard_array(mapped, swapped, group.transport(0));
  EXPECT_TRUE(moved.shards()[0].buffer.writable());
}

TEST(Buffer, ANoOpReshardOfAWritableArrayIsAReadOnlyAliasOfIt) {
  // JAX's arrays are immutable; here the result of a no-op shares the
  // input's memory, so it must not be a way to write into the input.
  const Topology one = Topology::uniform(2, 1);
  const NamedSharding rows(Mesh({{"x", 2}}, {0, 1}), PartitionSpec({{"x"}}));
  ShardedArray a = ShardedArray::allocate({2, 8}, DType::kF32, rows, one, 0);
  InProcessGroup group(1);
  for (const ShardedArray& same : {reshard_array(a, rows, group.transport(0)),
                                   reshard_arrays(std::span(&a, 1), std::span(&rows, 1), group.transport(0))[0],
                                   change_memory_kind(a, MemoryKind::kDevice)}) {
    EXPECT_TRUE(same.shards()[0].buffer.shares_memory_with(a.shards()[0].buffer));
    EXPECT_FALSE(same.shards()[0].buffer.writable());
    EXPECT_EQ(code_of([&] { (void)const_cast<ShardedArray&>(same).writable_bytes(0); }), ErrorCode::kInvalidArgument);
  }
  EXPECT_TRUE(a.shards()[0].buffer.writable());
  EXPECT_NO_THROW((void)a.writable_bytes(1));
  EXPECT_EQ(code_of([&] { (void)a.writable_bytes(2); }), ErrorCode::kInvalidArgument);
}

TEST(Buffer, AReadOnlyDestinationIsRefusedBeforeAnythingMoves) {
  const Topology two = Topology::uniform(4, 2);
  const NamedSharding src(Mesh({{"x", 4}}, {0, 1, 2, 3}), PartitionSpec({{"x"}}));
  const NamedSharding dst(Mesh({{"x", 4}}, {3, 2, 1, 0}), PartitionSpec({{"x"}}));
  std::vector<std::string> messages(2);
  try {
    testing::run_ranks(2, [&](Transport& t) {
      const ShardedArray a = testing::reference_array({8, 4}, DType::kF32, src, two, t.rank(), 1);
      ShardedArray target = ShardedArray::allocate({8, 4}, DType::kF32, dst, two, t.rank());
      if (t.rank() == 1) {  // its first shard read-only
        std::vector<Shard> shards = target.shards();
        shards[0].buffer = Buffer::adopt_read_only(std::as_const(shards[0].buffer).bytes(), shards[0].buffer.owner());
        target = ShardedArray({8, 4}, DType::kF32, dst, two, t.rank(), std::move(shards));
      }
      try {
        reshard_into(a, target, t);
      } catch (const Error& e) {
        messages[static_cast<size_t>(t.rank())] = e.what();
        throw;
      }
    });
    FAIL() << "wrote into a read-only shard";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("is read-only"), std::string::npos) << e.what();
  }
  EXPECT_NE(messages[0].find("process 1 failed"), std::string::npos) << messages[0];
}

}  // namespace
}  // namespace reshard
