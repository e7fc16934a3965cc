#include "execute/parallel_copy.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "layout/copy_bytes.h"
#include "support/seed.h"

namespace reshard {
namespace {

using Bytes = std::vector<std::byte>;

Bytes random_bytes(std::mt19937_64& rng, size_t size) {
  Bytes out(size);
  for (std::byte& b : out) b = static_cast<std::byte>(rng() & 0xff);
  return out;
}

TEST(CopyBytes, StreamingCopiesAnyAlignmentAndSize) {
  auto rng = testing::seeded_rng();
  const Bytes src = random_bytes(rng, 4096);
  for (int trial = 0; trial < 500; ++trial) {
    const size_t from = rng() % 64, to = rng() % 64, size = rng() % 2000;
    Bytes dst(4096, std::byte{0});
    copy_bytes(dst.data() + to, src.data() + from, size, CopyMode::kStreaming);
    finish_streaming();
    ASSERT_TRUE(std::equal(src.begin() + static_cast<ptrdiff_t>(from), src.begin() + static_cast<ptrdiff_t>(from + size),
                           dst.begin() + static_cast<ptrdiff_t>(to)))
        << "from " << from << " to " << to << " size " << size;
    EXPECT_TRUE(std::all_of(dst.begin() + static_cast<ptrdiff_t>(to + size), dst.end(), [](std::byte b) { return b == std::byte{0}; }));
    EXPECT_TRUE(std::all_of(dst.begin(), dst.begin() + static_cast<ptrdiff_t>(to), [](std::byte b) { return b == std::byte{0}; }));
  }
}

// Rows over columns: one source shard to several targets (strips that
// interleave in the source), and several sources to one target (strips that
// interleave in the target), split over threads at arbitrary points.
TEST(RunCopies, StripsInLockstepAndAloneGiveTheSameBytes) {
  auto rng = testing::seeded_rng();
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 40), strips = 1 + static_cast<int64_t>(rng() % 6);
    const int64_t strip_width = 1 + static_cast<int64_t>(rng() % 9);
    const int64_t width = strips * strip_width;
    const size_t element = size_t{1} << (rng() % 4);
    const Box whole({0, 0}, {rows, width});
    const Bytes source = random_bytes(rng, static_cast<size_t>(rows * width) * element);
    // Scatter: the whole source into one buffer per strip.
    std::vector<Bytes> strip_buffers;
    std::vector<CopyJob> scatter;
    for (int64_t s = 0; s < strips; ++s) {
      const Box strip({0, s * strip_width}, {rows, strip_width});
      strip_buffers.emplace_back(static_cast<size_t>(rows * strip_width) * element);
      scatter.push_back(CopyJob{BoxCopy(strip, whole, strip, element), source.data(), strip_buffers.back().data()});
    }
    const int threads = 1 + static_cast<int>(rng() % 4);
    const auto mode = rng() % 2 ? CopyMode::kStreaming : CopyMode::kCached;
    run_copies(scatter, threads, 1 + rng() % 64, mode);
    // Gather them back into one buffer.
    Bytes gathered(source.size());
    std::vector<CopyJob> gather;
    for (int64_t s = 0; s < strips; ++s) {
      const Box strip({0, s * strip_width}, {rows, strip_width});
      gather.push_back(CopyJob{BoxCopy(strip, strip, whole, element), strip_buffers[static_cast<size_t>(s)].data(),
                               gathered.data()});
    }
    run_copies(gather, threads, 1 + rng() % 64, mode);
    ASSERT_EQ(gathered, source) << rows << " rows, " << strips << " strips of " << strip_width << ", " << threads
                                << " threads";
    // Each strip on its own: the same bytes by the plain path.
    Bytes one_strip(strip_buffers[0].size());
    scatter[0].copy.copy(source.data(), one_strip.data());
    EXPECT_EQ(one_strip, strip_buffers[0]);
  }
}

TEST(RunCopies, SplitsOneLargeRunOverThreads) {
  auto rng = testing::seeded_rng();
  const Bytes source = random_bytes(rng, 1 << 20);
  Bytes target(source.size());
  const Box box({0}, {static_cast<int64_t>(source.size())});
  const std::vector<CopyJob> jobs{CopyJob{BoxCopy(box, box, box, 1), source.data(), target.data()}};
  run_copies(jobs, 3, 1000, CopyMode::kStreaming);
  EXPECT_EQ(target, source);
}

}  // namespace
}  // namespace reshard
