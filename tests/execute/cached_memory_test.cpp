// What reshard keeps after a call is reported, bounded, and given back on request.
#include "reshard/execute/cached_memory.h"

#include <gtest/gtest.h>

#include "execute/shared_arena.h"
#include "execute/staging_cache.h"

namespace reshard {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

class CachedMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = cached_memory_limit(); }
  void TearDown() override { set_cached_memory_limit(saved_); }
  uint64_t saved_ = 0;
};

TEST_F(CachedMemoryTest, StagingBuffersAreKeptReportedAndGivenBack) {
  release_cached_memory();
  EXPECT_EQ(cached_memory().staging_bytes, 0u);
  execute_detail::StagingCache& staging = execute_detail::StagingCache::for_process();
  staging.give_back(Buffer::allocate(3 * kMiB));
  staging.give_back(Buffer::allocate(2 * kMiB));
  EXPECT_EQ(cached_memory().staging_bytes, 5 * kMiB);
  set_cached_memory_limit(4 * kMiB);  // the oldest goes at once
  EXPECT_EQ(cached_memory().staging_bytes, 2 * kMiB);
  EXPECT_EQ(cached_memory().limit_bytes, 4 * kMiB);
  release_cached_memory();
  EXPECT_EQ(cached_memory().staging_bytes, 0u);
  staging.give_back(Buffer::allocate(kMiB));  // the bound stays: kept again
  EXPECT_EQ(cached_memory().staging_bytes, kMiB);
  set_cached_memory_limit(0);
  staging.give_back(Buffer::allocate(kMiB));
  EXPECT_EQ(cached_memory().staging_bytes, 0u);
}

TEST_F(CachedMemoryTest, TheSharedArenasKeptRangesAreReportedAndPunchedOut) {
  execute_detail::SharedArena* arena = execute_detail::SharedArena::for_process();
  ASSERT_NE(arena, nullptr) << "this machine refuses a memory file";
  set_cached_memory_limit(64 * kMiB);
  release_cached_memory();
  std::byte* data = arena->allocate(8 * kMiB);
  ASSERT_NE(data, nullptr);
  data[0] = std::byte{7};
  arena->release(data, 8 * kMiB);
  EXPECT_EQ(cached_memory().shared_arena_bytes, 8 * kMiB);
  release_cached_memory();
  EXPECT_EQ(cached_memory().shared_arena_bytes, 0u);
  EXPECT_EQ(arena->max_kept_bytes(), 64 * kMiB);  // released, not turned off
}

}  // namespace
}  // namespace reshard
