// The staging cache reuses freed buffers of the same size and stays within its bound, least recently used out.
#include "execute/staging_cache.h"

#include <gtest/gtest.h>

namespace reshard::execute_detail {
namespace {

TEST(StagingCache, ReusesABufferOfTheSameSize) {
  StagingCache cache(1 << 20);
  Buffer first = cache.take(4096);
  const std::byte* memory = first.data();
  cache.give_back(std::move(first));
  EXPECT_EQ(cache.kept_bytes(), 4096u);
  const Buffer again = cache.take(4096);
  EXPECT_EQ(again.data(), memory);
  EXPECT_EQ(cache.kept_bytes(), 0u);
  // Another size is a fresh buffer, not a kept one cut down.
  cache.give_back(cache.take(1024));
  EXPECT_EQ(cache.take(2048).size(), 2048u);
  EXPECT_EQ(cache.kept_buffers(), 1u);
}

TEST(StagingCache, DropsTheLeastRecentlyUsedToStayWithinItsBound) {
  StagingCache cache(3000);
  Buffer a = cache.take(1000), b = cache.take(1000), c = cache.take(1000), d = cache.take(1000);
  const std::byte* b_memory = b.data();
  const std::byte* c_memory = c.data();
  const std::byte* d_memory = d.data();
  cache.give_back(std::move(a));
  cache.give_back(std::move(b));
  cache.give_back(std::move(c));
  EXPECT_EQ(cache.kept_bytes(), 3000u);
  cache.give_back(std::move(d));  // a, the least recently used, goes
  EXPECT_EQ(cache.kept_bytes(), 3000u);
  EXPECT_EQ(cache.kept_buffers(), 3u);
  // The most recently given back comes out first; b, c and d are all still there.
  EXPECT_EQ(cache.take(1000).data(), d_memory);
  EXPECT_EQ(cache.take(1000).data(), c_memory);
  EXPECT_EQ(cache.take(1000).data(), b_memory);
  EXPECT_EQ(cache.kept_buffers(), 0u);
}

TEST(StagingCache, UsingABufferMakesItRecent) {
  StagingCache cache(2000);
  Buffer a = cache.take(1000), b = cache.take(1000);
  const std::byte* a_memory = a.data();
  cache.give_back(std::move(a));
  cache.give_back(std::move(b));
  Buffer reused = cache.take(1000);  // b, the most recent
  Buffer older = cache.take(1000);   // a
  EXPECT_EQ(older.data(), a_memory);
  cache.give_back(std::move(reused));
  cache.give_back(std::move(older));  // a is now the most recent
  cache.give_back(cache.take(500));   // over the bound: b (least recent) goes
  EXPECT_EQ(cache.kept_bytes(), 1500u);
  EXPECT_EQ(cache.take(1000).data(), a_memory);
}

TEST(StagingCache, KeepsNothingLargerThanItsBound) {
  StagingCache cache(1000);
  cache.give_back(Buffer::allocate(1001));
  EXPECT_EQ(cache.kept_bytes(), 0u);
  cache.give_back(Buffer());
  EXPECT_EQ(cache.kept_buffers(), 0u);
}

}  // namespace
}  // namespace reshard::execute_detail
