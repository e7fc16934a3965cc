// copy_between_runs and row_copies_between_runs: bytes in order from any run list into any other, whatever the
// boundaries on each side.
#include "execute/mpi/run_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "support/seed.h"

namespace reshard::mpi_detail {
namespace {

struct Runs {
  std::vector<RunGroup> groups;
  std::vector<uint64_t> offsets;  // every byte's offset in the buffer, in order
};

// Rows of equal runs at a stride (forwards, or backwards), long runs, odd
// runs, empty groups, over `buffer`: what a strided box on either side of a
// message looks like. Runs never overlap.
Runs random_runs(std::mt19937_64& rng, std::vector<std::byte>& buffer, uint64_t bytes) {
  Runs out;
  uint64_t at = 0;
  uint64_t left = bytes;
  std::vector<std::byte> unused;
  while (left > 0) {
    const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
    const uint64_t size = std::min<uint64_t>(left, kind == 0 ? std::uniform_int_distribution<uint64_t>(1, 5000)(rng)
                                                             : std::uniform_int_distribution<uint64_t>(16, 300)(rng));
    uint64_t count = kind == 0 ? 1 : std::uniform_int_distribution<uint64_t>(1, 40)(rng);
    count = std::min(count, left / size);
    const uint64_t stride = size + std::uniform_int_distribution<uint64_t>(0, 3)(rng) * 32;
    const bool backwards = kind == 3 && count > 1;
    const uint64_t first = backwards ? at + (count - 1) * stride : at;
    RunGroup group{reinterpret_cast<uintptr_t>(buffer.data()) + first, size, backwards ? ~stride + 1 : stride, count};
    out.groups.push_back(group);
    for (uint64_t r = 0; r < count; ++r) {
      const uint64_t start = backwards ? first - r * stride : first + r * stride;
      for (uint64_t b = 0; b < size; ++b) out.offsets.push_back(start + b);
    }
    if (std::uniform_int_distribution<int>(0, 5)(rng) == 0) out.groups.push_back(RunGroup{0, 0, 0, 0});
    at += count * stride + std::uniform_int_distribution<uint64_t>(0, 100)(rng);
    left -= size * count;
  }
  EXPECT_LE(at, buffer.size());
  return out;
}

TEST(CopyBetweenRuns, EveryByteArrivesInOrderAndNothingElseIsWritten) {
  std::mt19937_64 rng = reshard::testing::seeded_rng();
  for (int trial = 0; trial < 300; ++trial) {
    const uint64_t bytes = std::uniform_int_distribution<uint64_t>(1, trial % 10 == 0 ? 3 << 20 : 20000)(rng);
    // Room for the widest strides and gaps the generator makes (runs of 16
    // bytes or more, at most 96 apart, groups at most 100 apart).
    std::vector<std::byte> source(bytes * 14 + 4096), target(bytes * 14 + 4096, std::byte{0xEE});
    for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<std::byte>(rng());
    const Runs from = random_runs(rng, source, bytes);
    const Runs to = random_runs(rng, target, bytes);
    ASSERT_EQ(from.offsets.size(), bytes);
    ASSERT_EQ(to.offsets.size(), bytes);
    std::vector<std::byte> expected(target);
    for (uint64_t i = 0; i < bytes; ++i) expected[to.offsets[i]] = source[from.offsets[i]];
    copy_between_runs(to.groups, from.groups, bytes);
    ASSERT_EQ(target, expected) << "trial " << trial << ", " << bytes << " bytes";
  }
}

TEST(CopyBetweenRuns, RowsIntoOneRunAndOneRunIntoRows) {
  // The split-dimension change's shape: 256-byte runs 4 KiB apart on one
  // side, one contiguous run on the other, large enough to stream.
  const uint64_t rows = 8192, run = 256, stride = 4096;
  std::vector<std::byte> strided(rows * stride), packed(rows * run), back(rows * stride, std::byte{0});
  for (size_t i = 0; i < strided.size(); ++i) strided[i] = static_cast<std::byte>(i * 13 + i / 4096);
  const RunGroup rows_group{reinterpret_cast<uintptr_t>(strided.data()), run, stride, rows};
  const RunGroup one{reinterpret_cast<uintptr_t>(packed.data()), rows * run, 0, 1};
  copy_between_runs(std::span(&one, 1), std::span(&rows_group, 1), rows * run);
  for (uint64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(std::memcmp(packed.data() + r * run, strided.data() + r * stride, run), 0) << "row " << r;
  }
  const RunGroup back_rows{reinterpret_cast<uintptr_t>(back.data()), run, stride, rows};
  copy_between_runs(std::span(&back_rows, 1), std::span(&one, 1), rows * run);
  for (uint64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(std::memcmp(back.data() + r * stride, strided.data() + r * stride, run), 0) << "row " << r;
    ASSERT_EQ(back[r * stride + run], std::byte{0}) << "row " << r << " wrote past its run";
  }
}

TEST(RowCopiesBetweenRuns, SeveralMessagesWalkedTogetherEachArriveInOrder) {
  // What a batch of sends that write into their receivers does: each
  // message's copy as its strided copies, all walked together (those that
  // step alike through the same rows in lockstep), each into its own target.
  std::mt19937_64 rng = reshard::testing::seeded_rng();
  for (int trial = 0; trial < 60; ++trial) {
    const int messages = std::uniform_int_distribution<int>(1, 6)(rng);
    std::vector<std::vector<std::byte>> sources, targets, expected;
    std::vector<GatherJob> jobs;
    for (int m = 0; m < messages; ++m) {
      const uint64_t bytes = std::uniform_int_distribution<uint64_t>(1, trial % 10 == 0 ? 2 << 20 : 20000)(rng);
      std::vector<std::byte>& source = sources.emplace_back(bytes * 14 + 4096);
      std::vector<std::byte>& target = targets.emplace_back(bytes * 14 + 4096, std::byte{0xEE});
      for (std::byte& b : source) b = static_cast<std::byte>(rng());
      const Runs from = random_runs(rng, source, bytes);
      const Runs to = random_runs(rng, target, bytes);
      std::vector<std::byte>& want = expected.emplace_back(target);
      for (uint64_t i = 0; i < bytes; ++i) want[to.offsets[i]] = source[from.offsets[i]];
      const std::vector<GatherJob> copies = row_copies_between_runs(to.groups, from.groups, bytes);
      jobs.insert(jobs.end(), copies.begin(), copies.end());
    }
    gather_streaming(jobs, 1 + trial % 3);
    for (int m = 0; m < messages; ++m) {
      ASSERT_EQ(targets[static_cast<size_t>(m)], expected[static_cast<size_t>(m)])
          << "trial " << trial << ", message " << m << " of " << messages;
    }
  }
}

TEST(GroupInside, EveryRunOrNone) {
  const uint64_t base = 1 << 20, bytes = 1 << 16;
  EXPECT_TRUE(group_inside({base, 100, 200, 10}, base, bytes));
  EXPECT_TRUE(group_inside({base + bytes - 100, 100, 0, 1}, base, bytes));
  EXPECT_FALSE(group_inside({base + bytes - 99, 100, 0, 1}, base, bytes));
  EXPECT_FALSE(group_inside({base - 1, 100, 0, 1}, base, bytes));
  // The last run strays out.
  EXPECT_FALSE(group_inside({base, 100, 1000, 67}, base, bytes));
  EXPECT_TRUE(group_inside({base, 100, 1000, 66}, base, bytes));
  // Backwards strides, in and out.
  EXPECT_TRUE(group_inside({base + 9000, 100, ~uint64_t{999}, 10}, base, bytes));
  EXPECT_FALSE(group_inside({base + 9000, 100, ~uint64_t{999}, 11}, base, bytes));
  // Progressions that wrap around to land inside at both ends.
  EXPECT_FALSE(group_inside({base, 100, uint64_t{1} << 63, 3}, base, bytes));
  EXPECT_FALSE(group_inside({base, 100, uint64_t{1} << 62, 5}, base, bytes));
  EXPECT_FALSE(group_inside({base, 100, 1, ~uint64_t{0}}, base, bytes));
  // Empty groups hold no bytes anywhere.
  EXPECT_TRUE(group_inside({0, 0, 0, 5}, base, bytes));
}

}  // namespace
}  // namespace reshard::mpi_detail
