// Same-host reads and the streaming gather, exercised on this process's own memory.
#include "execute/mpi/same_host_copy.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

}  // namespace
}  // namespace reshard::mpi_detail
