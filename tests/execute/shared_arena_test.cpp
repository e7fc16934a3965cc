// SharedArena: ranges handed out without overlap, aligned, reused once given back, and read as zeros after.
#include "execute/shared_arena.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "reshard/execute/buffer.h"
#include "support/capability.h"
#include "support/seed.h"

namespace reshard::execute_detail {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(SharedArena, RangesAreAlignedDisjointAndInside) {
  SharedArena arena(64 * kMiB, 0);
  std::byte* small = arena.allocate(100);
  std::byte* large = arena.allocate(5 * kMiB);
  std::byte* middle = arena.allocate(300 << 10);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(large, nullptr);
  ASSERT_NE(middle, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % (64 << 10), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large) % (2 * kMiB), 0u) << "4 MiB and more start on a 2 MiB boundary";
  EXPECT_TRUE(arena.contains(large, 5 * kMiB));
  EXPECT_FALSE(arena.contains(large, 64 * kMiB));
  int on_stack = 0;
  EXPECT_FALSE(arena.contains(&on_stack, sizeof(on_stack)));
  // Writable, disjoint, and the token at the start untouched.
  const std::vector<std::byte> token(arena.token().begin(), arena.token().end());
  std::memset(small, 1, 100);
  std::memset(middle, 2, 300 << 10);
  std::memset(large, 3, 5 * kMiB);
  EXPECT_EQ(small[99], std::byte{1});
  EXPECT_EQ(middle[0], std::byte{2});
  EXPECT_TRUE(std::equal(token.begin(), token.end(), arena.token().begin()));
  EXPECT_EQ(arena.allocated_bytes(), (64u << 10) + 5 * kMiB + (320u << 10));
}

TEST(SharedArena, AFullArenaSaysSoAndRoomComesBackWhenGivenBack) {
  SharedArena arena(16 * kMiB, 0);
  std::vector<std::byte*> taken;
  while (std::byte* p = arena.allocate(kMiB)) taken.push_back(p);
  EXPECT_EQ(taken.size(), 15u) << "the first 64 KiB hold the token";
  EXPECT_EQ(arena.allocate(kMiB), nullptr);
  // Two neighbours given back merge into one range that holds 2 MiB.
  std::memset(taken[3], 7, kMiB);
  arena.release(taken[3], kMiB);
  arena.release(taken[4], kMiB);
  std::byte* merged = arena.allocate(2 * kMiB);
  ASSERT_EQ(merged, taken[3]);
  EXPECT_EQ(merged[0], std::byte{0}) << "a range given back (and none kept) reads as zeros";
  for (size_t i = 0; i < taken.size(); ++i) {
    if (i != 3 && i != 4) arena.release(taken[i], kMiB);
  }
  arena.release(merged, 2 * kMiB);
  EXPECT_EQ(arena.allocated_bytes(), 0u);
  EXPECT_NE(arena.allocate(14 * kMiB), nullptr) << "everything merged back into one range (2 MiB aligned: 2 to 16 MiB)";
}

TEST(SharedArena, FreedRangesAreKeptForTheSameSizeUpToTheBound) {
  SharedArena arena(64 * kMiB, 3 * kMiB);
  std::byte* a = arena.allocate(kMiB);
  std::byte* b = arena.allocate(kMiB);
  std::byte* c = arena.allocate(2 * kMiB);
  std::memset(a, 1, kMiB);
  std::memset(b, 2, kMiB);
  std::memset(c, 3, 2 * kMiB);
  arena.release(a, kMiB);
  arena.release(b, kMiB);
  EXPECT_EQ(arena.kept_bytes(), 2 * kMiB);
  // The most recently freed range of the size comes back as it was.
  EXPECT_EQ(arena.allocate(kMiB), b);
  EXPECT_EQ(b[kMiB - 1], std::byte{2});
  arena.release(b, kMiB);
  // Keeping c too would pass 3 MiB: the oldest kept range (a) is punched.
  arena.release(c, 2 * kMiB);
  EXPECT_EQ(arena.kept_bytes(), 3 * kMiB);
  EXPECT_EQ(arena.allocate(2 * kMiB), c);
  EXPECT_EQ(c[0], std::byte{3});
  std::byte* again = arena.allocate(kMiB);
  EXPECT_EQ(again, b);
  std::byte* fresh = arena.allocate(kMiB);
  EXPECT_EQ(fresh, a) << "a punched range is free again";
  EXPECT_EQ(fresh[0], std::byte{0}) << "and its pages went back to the kernel";
  // A size with no kept range of its own still gets the room they hold.
  arena.release(again, kMiB);
  arena.release(fresh, kMiB);
  arena.release(c, 2 * kMiB);
  std::byte* whole = arena.allocate(60 * kMiB);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(arena.kept_bytes(), 0u);
}

TEST(SharedArena, RandomAllocationsNeverOverlap) {
  std::mt19937_64 rng = reshard::testing::seeded_rng();
  SharedArena arena(256 * kMiB, 16 * kMiB);
  struct Live {
    std::byte* data;
    size_t bytes;
    std::byte mark;
  };
  std::vector<Live> live;
  for (int step = 0; step < 2000; ++step) {
    if (!live.empty() && std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
      const size_t i = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
      // Nobody wrote over it while it was live.
      ASSERT_EQ(live[i].data[0], live[i].mark);
      ASSERT_EQ(live[i].data[live[i].bytes - 1], live[i].mark);
      arena.release(live[i].data, live[i].bytes);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    const size_t bytes = std::uniform_int_distribution<size_t>(1, 6 * kMiB)(rng);
    std::byte* data = arena.allocate(bytes);
    if (data == nullptr) continue;
    const auto mark = static_cast<std::byte>(step);
    data[0] = mark;
    data[bytes - 1] = mark;
    live.push_back({data, bytes, mark});
  }
  for (const Live& l : live) {
    ASSERT_EQ(l.data[0], l.mark);
    ASSERT_EQ(l.data[l.bytes - 1], l.mark);
  }
}

TEST(SharedArena, BuffersComeFromTheProcessArenaOnlyOnceItServesThem) {
  SharedArena* arena = SharedArena::for_process();
  if (arena == nullptr) RESHARD_SKIP_WITHOUT("memory files (memfd_create)") << "this system refuses them";
  if (!SharedArena::serving_allocations()) {
    Buffer before = Buffer::allocate(kMiB);
    EXPECT_FALSE(arena->contains(before.data(), before.size()));
  }
  SharedArena::serve_allocations();
  Buffer large = Buffer::allocate(kMiB);
  Buffer small = Buffer::allocate(SharedArena::kMinBytes - 1);
  EXPECT_TRUE(arena->contains(large.data(), large.size()));
  EXPECT_FALSE(arena->contains(small.data(), small.size()));
  const uint64_t held = arena->allocated_bytes();
  large = Buffer();
  EXPECT_EQ(arena->allocated_bytes(), held - kMiB) << "the last copy's end gives the range back";
}

}  // namespace
}  // namespace reshard::execute_detail
