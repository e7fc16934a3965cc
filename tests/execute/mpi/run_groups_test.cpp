// RunGroups and RunCursor: any run list survives grouping and comes back out, in any batch sizes.
#include "execute/mpi/run_groups.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "reshard/layout/error.h"
#include "support/seed.h"

namespace reshard::mpi_detail {
namespace {

struct Span {
  uint64_t address;
  uint64_t size;
  bool operator==(const Span&) const = default;
};

// The runs as (address, size), empty ones dropped and neighbours in memory merged.
std::vector<Span> canonical(const std::vector<Span>& runs) {
  std::vector<Span> out;
  for (const Span& r : runs) {
    if (r.size == 0) continue;
    if (!out.empty() && out.back().address + out.back().size == r.address) {
      out.back().size += r.size;
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<ConstByteRun> as_runs(const std::vector<Span>& spans) {
  std::vector<ConstByteRun> runs;
  for (const Span& s : spans) {
    runs.push_back({reinterpret_cast<const std::byte*>(static_cast<uintptr_t>(s.address)), s.size});
  }
  return runs;
}

// Rows of equal runs at a stride, contiguous stretches, odd runs, empties:
// what boxes and several transfers in one message produce.
std::vector<Span> random_runs(std::mt19937_64& rng) {
  std::vector<Span> runs;
  uint64_t address = 1 << 20;
  const int pieces = std::uniform_int_distribution<int>(1, 6)(rng);
  for (int p = 0; p < pieces; ++p) {
    const uint64_t size = std::uniform_int_distribution<uint64_t>(0, 300)(rng);
    const uint64_t stride = size + std::uniform_int_distribution<uint64_t>(0, 3)(rng) * 64;
    const int count = std::uniform_int_distribution<int>(1, 50)(rng);
    for (int i = 0; i < count; ++i) runs.push_back({address + static_cast<uint64_t>(i) * stride, size});
    address += static_cast<uint64_t>(count) * stride + std::uniform_int_distribution<uint64_t>(0, 4096)(rng);
  }
  return runs;
}

// Everything a cursor hands out, in batches of at most `iovecs` and `max_bytes`.
std::vector<Span> drain(const std::vector<RunGroup>& groups, size_t iovecs, uint64_t max_bytes) {
  RunCursor cursor(groups);
  std::vector<iovec> batch(iovecs);
  std::vector<Span> out;
  while (!cursor.at_end()) {
    const RunCursor::Filled filled = cursor.peek(batch, max_bytes);
    EXPECT_GT(filled.bytes, 0u);
    if (filled.bytes == 0) break;
    uint64_t sum = 0;
    for (size_t i = 0; i < filled.iovecs; ++i) {
      out.push_back({static_cast<uint64_t>(reinterpret_cast<uintptr_t>(batch[i].iov_base)), batch[i].iov_len});
      sum += batch[i].iov_len;
    }
    EXPECT_EQ(sum, filled.bytes);
    EXPECT_LE(filled.bytes, max_bytes);
    cursor.advance(filled.bytes);
  }
  return out;
}

TEST(RunGroups, AnyRunListComesBackOutWhateverTheBatches) {
  std::mt19937_64 rng = testing::seeded_rng();
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<Span> runs = random_runs(rng);
    const std::vector<RunGroup> groups = group_runs(as_runs(runs));
    uint64_t bytes = 0;
    for (const Span& r : runs) bytes += r.size;
    EXPECT_EQ(count_bytes(groups), bytes);
    EXPECT_LE(groups.size(), canonical(runs).size());
    const size_t iovecs = std::uniform_int_distribution<size_t>(1, 64)(rng);
    const uint64_t max_bytes = std::uniform_int_distribution<uint64_t>(1, 2000)(rng);
    EXPECT_EQ(canonical(drain(groups, iovecs, max_bytes)), canonical(runs)) << "trial " << trial;
  }
}

// Random rows: stretches of runs at a stride (forwards or backwards), lone
// runs, empties, and stretches that continue the one before.
std::vector<ConstRunRows> random_rows(std::mt19937_64& rng, std::vector<Span>& runs) {
  std::vector<ConstRunRows> rows;
  uint64_t address = 1 << 24;
  const int stretches = std::uniform_int_distribution<int>(1, 8)(rng);
  for (int p = 0; p < stretches; ++p) {
    const uint64_t size = std::uniform_int_distribution<uint64_t>(0, 300)(rng);
    auto stride = static_cast<int64_t>(size + std::uniform_int_distribution<uint64_t>(0, 3)(rng) * 64);
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) stride = -stride;
    const auto count = std::uniform_int_distribution<uint64_t>(0, 40)(rng);
    rows.push_back({reinterpret_cast<const std::byte*>(static_cast<uintptr_t>(address)), size, stride, count});
    for (uint64_t i = 0; i < count; ++i) runs.push_back({address + i * static_cast<uint64_t>(stride), size});
    // Half the time the next stretch carries on where this one's steps lead.
    const bool carry_on = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
    address = carry_on ? address + count * static_cast<uint64_t>(stride)
                       : address + 80'000 + std::uniform_int_distribution<uint64_t>(0, 4096)(rng);
  }
  return rows;
}

TEST(RunGroups, RowsComeBackOutAsTheirRuns) {
  std::mt19937_64 rng = testing::seeded_rng();
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<Span> runs;
    const std::vector<ConstRunRows> rows = random_rows(rng, runs);
    const std::vector<RunGroup> groups = group_rows(rows);
    uint64_t bytes = 0;
    for (const Span& r : runs) bytes += r.size;
    EXPECT_EQ(count_bytes(groups), bytes);
    EXPECT_LE(groups.size(), rows.size());
    EXPECT_EQ(canonical(drain(groups, 64, 1 << 20)), canonical(runs)) << "trial " << trial;
  }
}

TEST(RunGroups, RowsThatContinueOneAnotherAreOneGroup) {
  const auto at = [](uint64_t a) { return reinterpret_cast<const std::byte*>(static_cast<uintptr_t>(a)); };
  // A box's rows cut in three by messages and part rows: one progression.
  const std::vector<ConstRunRows> rows{
      {at(4096), 256, 0, 1}, {at(8192), 256, 4096, 100}, {at(8192 + 409600), 256, 0, 1}};
  const std::vector<RunGroup> groups = group_rows(rows);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].count, 102u);
  EXPECT_EQ(groups[0].stride, 4096u);
}

TEST(RunGroups, AStridedBoxIsOneGroupAndContiguousRunsMerge) {
  std::vector<Span> rows;
  for (uint64_t i = 0; i < 10'000; ++i) rows.push_back({4096 + i * 4096, 256});
  const std::vector<RunGroup> strided = group_runs(as_runs(rows));
  ASSERT_EQ(strided.size(), 1u);
  EXPECT_EQ(strided[0].count, 10'000u);
  EXPECT_EQ(strided[0].stride, 4096u);
  EXPECT_EQ(count_runs(strided), 10'000u);

  std::vector<Span> touching;
  for (uint64_t i = 0; i < 100; ++i) touching.push_back({4096 + i * 256, 256});
  const std::vector<RunGroup> merged = group_runs(as_runs(touching));
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].size, 25'600u);
  EXPECT_EQ(count_runs(merged), 1u);
}

TEST(RunGroups, APeersGroupsWhoseBytesOverflowAreRefused) {
  const std::vector<RunGroup> huge = {{0, uint64_t{1} << 40, 0, uint64_t{1} << 30}};
  EXPECT_THROW(count_bytes(huge), Error);
  const std::vector<RunGroup> many = {{0, 1, 1, UINT64_MAX}, {0, 1, 1, 2}};
  EXPECT_THROW(count_runs(many), Error);
}

}  // namespace
}  // namespace reshard::mpi_detail
