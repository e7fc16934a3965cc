// Same-host reads and the streaming gather, exercised on this process's own memory.
#include "execute/mpi/same_host_copy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "execute/mpi/streaming_gather.h"
#include "reshard/layout/error.h"
#include "support/seed.h"

namespace reshard::mpi_detail {
namespace {

// `count` runs of `size` bytes every `stride` bytes of `memory`, from `first`.
template <typename Run, typename Byte>
std::vector<Run> strided(Byte* memory, size_t first, size_t size, size_t stride, size_t count) {
  std::vector<Run> runs;
  for (size_t i = 0; i < count; ++i) runs.push_back({memory + first + i * stride, size});
  return runs;
}

TEST(SameHostCopy, ReadsStridedRunsIntoStridedRunsAcrossManyCalls) {
  // More runs than one call's IOV_MAX on both sides, of different shapes.
  std::mt19937_64 rng = testing::seeded_rng();
  std::vector<std::byte> source(3000 * 512);
  for (std::byte& b : source) b = static_cast<std::byte>(rng());
  std::vector<std::byte> target(6000 * 192, std::byte{0});
  const auto remote = strided<ConstByteRun>(source.data(), 5, 128, 512, 3000);     // 384,000 bytes
  const auto local = strided<ByteRun>(target.data(), 7, 64, 192, 6000);            // the same
  read_from_peer(::getpid(), 0, group_runs(remote), group_runs(local), 3000 * 128);
  std::vector<std::byte> expected, found;
  for (const auto& r : remote) expected.insert(expected.end(), r.data, r.data + r.size);
  for (const auto& r : local) found.insert(found.end(), r.data, r.data + r.size);
  EXPECT_EQ(found, expected);
  // Bytes between the local runs are untouched.
  EXPECT_EQ(target[0], std::byte{0});
  EXPECT_EQ(target[7 + 64], std::byte{0});
}

TEST(SameHostCopy, AnUnmappedPeerAddressIsATransportErrorNamingThePeer) {
  std::vector<std::byte> target(4096);
  const std::vector<RunGroup> remote = {{16, 4096, 0, 1}};  // the first page is never mapped
  const std::vector<ByteRun> local = {{target.data(), target.size()}};
  try {
    read_from_peer(::getpid(), 3, remote, group_runs(local), 4096);
    FAIL() << "read an unmapped page";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTransport);
    EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::strerror(EFAULT)), std::string::npos) << e.what();
  }
}

TEST(SameHostCopy, TheProbeFindsOnlyTheExpectedToken) {
  const std::vector<std::byte> token = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
  const auto address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(token.data()));
  EXPECT_TRUE(can_read_peer(::getpid(), address, token));
  const std::vector<std::byte> other = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{5}};
  EXPECT_FALSE(can_read_peer(::getpid(), address, other));
  EXPECT_FALSE(can_read_peer(::getpid(), 16, token));
  EXPECT_FALSE(can_read_peer(-1, address, token));
}

TEST(StreamingGather, EqualsPlainConcatenationForAnyRunsAndAlignment) {
  std::mt19937_64 rng = testing::seeded_rng();
  std::vector<std::byte> source(1 << 16);
  for (std::byte& b : source) b = static_cast<std::byte>(rng());
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<ConstByteRun> runs;
    std::vector<std::byte> expected;
    const int count = std::uniform_int_distribution<int>(0, 40)(rng);
    for (int i = 0; i < count; ++i) {
      const size_t size = std::uniform_int_distribution<size_t>(0, 700)(rng);
      const size_t at = std::uniform_int_distribution<size_t>(0, source.size() - size)(rng);
      // An empty run may point nowhere (an empty shard's buffer).
      runs.push_back({size == 0 && i % 2 == 0 ? nullptr : source.data() + at, size});
      expected.insert(expected.end(), source.data() + at, source.data() + at + size);
    }
    const size_t offset = std::uniform_int_distribution<size_t>(0, 15)(rng);  // any alignment
    std::vector<std::byte> out(expected.size() + offset + 1, std::byte{0x5a});
    gather_streaming(runs, out.data() + offset);
    EXPECT_EQ(std::vector<std::byte>(out.begin() + static_cast<long>(offset), out.end() - 1), expected)
        << "trial " << trial;
    EXPECT_EQ(out.back(), std::byte{0x5a}) << "wrote past the end, trial " << trial;
  }
}

// Strips of one buffer for several messages (walked together, a block of
// rows at a time), mixed with progressions that step backwards, runs longer
// than their stride, strides too long to share a block and empty groups, on
// 1 to 3 threads (which split the walks by rows once there are megabytes):
// each message must hold exactly its runs, in order, and nothing past its end.
TEST(StreamingGather, JobsWalkedTogetherGiveEachMessageItsOwnRuns) {
  std::mt19937_64 rng = testing::seeded_rng();
  std::vector<std::byte> source(4 << 20);
  for (std::byte& b : source) b = static_cast<std::byte>(rng());
  const auto address = [&](size_t at) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(source.data() + at)); };
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<RunGroup> groups;
    const size_t stride = std::uniform_int_distribution<size_t>(64, 8192)(rng);
    const size_t rows = std::uniform_int_distribution<size_t>(2, (source.size() - stride) / stride)(rng);
    const size_t strips = std::uniform_int_distribution<size_t>(1, 8)(rng);
    for (size_t s = 0; s < strips; ++s) {  // the strips of one shard: alike, within one stride
      const size_t width = std::uniform_int_distribution<size_t>(1, stride / strips)(rng);
      groups.push_back({address(s * (stride / strips)), width, stride, rows});
    }
    const size_t others = std::uniform_int_distribution<size_t>(0, 4)(rng);
    for (size_t o = 0; o < others; ++o) {
      const uint64_t size = std::uniform_int_distribution<uint64_t>(0, 300)(rng);
      const uint64_t count = std::uniform_int_distribution<uint64_t>(0, 50)(rng);
      const uint64_t step = std::uniform_int_distribution<uint64_t>(1, 20000)(rng);
      if (rng() % 2) {  // backwards from the end
        const uint64_t back = step + size;
        groups.push_back({address(source.size() - size - 1), size, ~back + 1, std::min<uint64_t>(count, (source.size() - size) / back)});
      } else {
        const uint64_t forward = size > 0 && rng() % 2 ? size / 2 + 1 : step;  // runs may overlap
        groups.push_back({address(0), size, forward, std::min<uint64_t>(count, (source.size() - size) / forward)});
      }
    }
    std::shuffle(groups.begin(), groups.end(), rng);
    // Each group is one message of its own here, at any alignment.
    std::vector<std::vector<std::byte>> out(groups.size()), expected(groups.size());
    std::vector<GatherJob> jobs;
    for (size_t g = 0; g < groups.size(); ++g) {
      const RunGroup& group = groups[g];
      for (uint64_t i = 0; i < group.count; ++i) {
        const auto* run = reinterpret_cast<const std::byte*>(group.address + i * group.stride);
        expected[g].insert(expected[g].end(), run, run + group.size);
      }
      out[g].assign(expected[g].size() + 9, std::byte{0x5a});
      jobs.push_back({group, out[g].data() + g % 8});
    }
    const int threads = std::uniform_int_distribution<int>(1, 3)(rng);
    gather_streaming(jobs, threads);
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto begin = out[g].begin() + static_cast<long>(g % 8);
      EXPECT_EQ(std::vector<std::byte>(begin, begin + static_cast<long>(expected[g].size())), expected[g])
          << "trial " << trial << ", " << threads << " threads, group " << g << " of " << groups.size() << ": " << groups[g].count
          << " runs of " << groups[g].size << " every " << groups[g].stride;
      EXPECT_TRUE(std::all_of(begin + static_cast<long>(expected[g].size()), out[g].end(),
                              [](std::byte b) { return b == std::byte{0x5a}; }))
          << "wrote past the end, trial " << trial << ", group " << g;
    }
  }
}

}  // namespace
}  // namespace reshard::mpi_detail
