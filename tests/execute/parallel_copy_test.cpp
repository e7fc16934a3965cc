#include "execute/parallel_copy.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "layout/copy_bytes.h"
#include "support/seed.h"

namespace reshard::execute_detail {

using layout_detail::BoxCopy;
using layout_detail::copy_bytes;
using layout_detail::copy_rows;
using layout_detail::copy_rows_together;
using layout_detail::CopyMode;
using layout_detail::finish_streaming;
using layout_detail::prefetch_rows_a_page_apart;
using layout_detail::RowsCopy;

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
// interleave in the target), split over threads at arbitrary points. Strips
// of equal widths go row by row together, strips of several widths in
// blocks: half the trials take each.
TEST(RunCopies, StripsInLockstepAndAloneGiveTheSameBytes) {
  auto rng = testing::seeded_rng();
  for (int trial = 0; trial < 80; ++trial) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 40), strips = 1 + static_cast<int64_t>(rng() % 6);
    const bool equal_widths = trial % 2 == 0;
    const int64_t common_width = 1 + static_cast<int64_t>(rng() % 9);
    std::vector<int64_t> starts{0};  // strip s spans columns [starts[s], starts[s + 1])
    for (int64_t s = 0; s < strips; ++s) {
      starts.push_back(starts.back() + (equal_widths ? common_width : 1 + static_cast<int64_t>(rng() % 9)));
    }
    const int64_t width = starts.back();
    const size_t element = size_t{1} << (rng() % 4);
    const Box whole({0, 0}, {rows, width});
    const Bytes source = random_bytes(rng, static_cast<size_t>(rows * width) * element);
    const auto strip_box = [&](int64_t s) {
      const auto at = static_cast<size_t>(s);
      return Box({0, starts[at]}, {rows, starts[at + 1] - starts[at]});
    };
    // Scatter: the whole source into one buffer per strip.
    std::vector<Bytes> strip_buffers;
    std::vector<CopyJob> scatter;
    for (int64_t s = 0; s < strips; ++s) {
      const Box strip = strip_box(s);
      strip_buffers.emplace_back(static_cast<size_t>(strip.volume()) * element);
      scatter.push_back(CopyJob{BoxCopy(strip, whole, strip, element), source.data(), strip_buffers.back().data()});
    }
    const int threads = 1 + static_cast<int>(rng() % 4);
    const auto mode = rng() % 2 ? CopyMode::kStreaming : CopyMode::kCached;
    run_copies(scatter, threads, 1 + rng() % 64, mode);
    // Gather them back into one buffer.
    Bytes gathered(source.size());
    std::vector<CopyJob> gather;
    for (int64_t s = 0; s < strips; ++s) {
      const Box strip = strip_box(s);
      gather.push_back(CopyJob{BoxCopy(strip, strip, whole, element), strip_buffers[static_cast<size_t>(s)].data(),
                               gathered.data()});
    }
    run_copies(gather, threads, 1 + rng() % 64, mode);
    ASSERT_EQ(gathered, source) << rows << " rows, " << strips << " strips (equal widths: " << equal_widths << "), "
                                << threads << " threads";
    // Each strip on its own: the same bytes by the plain path.
    for (int64_t s = 0; s < strips; ++s) {
      Bytes one_strip(strip_buffers[static_cast<size_t>(s)].size());
      scatter[static_cast<size_t>(s)].copy.copy(source.data(), one_strip.data());
      EXPECT_EQ(one_strip, strip_buffers[static_cast<size_t>(s)]) << "strip " << s;
    }
  }
}

// Strips of a box that does not fill its buffer (so its rows step through
// two outer dimensions that do not merge), large enough for many lockstep
// blocks: a group's rows wrap the inner dimension inside a block, blocks end
// mid-dimension, and threads split the rows anywhere. Each strip must match
// its own copy by the plain path, and the strips gathered back the source.
TEST(RunCopies, LockstepBlocksCrossOuterDimensions) {
  auto rng = testing::seeded_rng();
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t planes = 1 + static_cast<int64_t>(rng() % 4), rows = 1 + static_cast<int64_t>(rng() % 300);
    const int64_t padding = 1 + static_cast<int64_t>(rng() % 3), strips = 2 + static_cast<int64_t>(rng() % 7);
    const int64_t strip_width = 1 + static_cast<int64_t>(rng() % 200);
    const size_t element = size_t{1} << (rng() % 4);
    const int64_t width = strips * strip_width;
    const Box extent({0, 0, 0}, {planes, rows + padding, width});
    const Bytes source = random_bytes(rng, static_cast<size_t>(extent.volume()) * element);
    std::vector<Bytes> by_run_copies, by_plain_copy;
    std::vector<CopyJob> scatter;
    for (int64_t s = 0; s < strips; ++s) {
      const Box strip({0, 0, s * strip_width}, {planes, rows, strip_width});
      const size_t bytes = static_cast<size_t>(strip.volume()) * element;
      by_run_copies.emplace_back(bytes);
      by_plain_copy.emplace_back(bytes);
      scatter.push_back(CopyJob{BoxCopy(strip, extent, strip, element), source.data(), by_run_copies.back().data()});
      scatter.back().copy.copy(source.data(), by_plain_copy.back().data());
    }
    const int threads = 1 + static_cast<int>(rng() % 3);
    const auto mode = rng() % 2 ? CopyMode::kStreaming : CopyMode::kCached;
    const std::string what = fmt::format("{} planes of {} rows, {} strips of {} x {} bytes, {} threads", planes, rows,
                                         strips, strip_width, element, threads);
    run_copies(scatter, threads, 1 + rng() % 20000, mode);
    ASSERT_EQ(by_run_copies, by_plain_copy) << what;
    Bytes gathered(source.size(), std::byte{0});
    std::vector<CopyJob> gather;
    for (int64_t s = 0; s < strips; ++s) {
      const Box strip({0, 0, s * strip_width}, {planes, rows, strip_width});
      gather.push_back(CopyJob{BoxCopy(strip, strip, extent, element), by_run_copies[static_cast<size_t>(s)].data(),
                               gathered.data()});
    }
    run_copies(gather, threads, 1 + rng() % 20000, mode);
    const BoxCopy whole(Box({0, 0, 0}, {planes, rows, width}), extent, Box({0, 0, 0}, {planes, rows, width}), element);
    Bytes expected(whole.bytes()), got(whole.bytes());
    whole.copy(source.data(), expected.data());
    whole.copy(gathered.data(), got.data());
    EXPECT_EQ(got, expected) << what;
  }
}

TEST(CopyRows, StepsEitherWayThroughBothBuffers) {
  auto rng = testing::seeded_rng();
  const Bytes src = random_bytes(rng, 128 * 1024);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t size = 1 + rng() % 700, rows = 1 + rng() % 20;
    // Sources a page or more apart per row: prefetched in every other trial.
    const size_t far = rng() % 2 ? 4096 + rng() % 1024 : 0;
    const auto src_stride = static_cast<int64_t>(size + far + rng() % 64) * (rng() % 2 ? 1 : -1);
    const auto dst_stride = static_cast<int64_t>(size + rng() % 64) * (rng() % 2 ? 1 : -1);
    // Start where every row stays inside both buffers, whichever way they step.
    const auto start = [&](int64_t stride) { return stride < 0 ? static_cast<size_t>(-stride) * (rows - 1) : 0; };
    Bytes dst(64 * 1024, std::byte{0}), expected(dst);
    const std::byte* from = src.data() + start(src_stride);
    const auto mode = rng() % 2 ? CopyMode::kStreaming : CopyMode::kCached;
    prefetch_rows_a_page_apart(trial % 2 == 1);
    copy_rows(dst.data() + start(dst_stride), dst_stride, from, src_stride, size, rows, mode);
    prefetch_rows_a_page_apart(false);
    finish_streaming();
    for (size_t r = 0; r < rows; ++r) {
      const auto i = static_cast<int64_t>(r);
      std::memcpy(expected.data() + static_cast<int64_t>(start(dst_stride)) + i * dst_stride, from + i * src_stride, size);
    }
    ASSERT_EQ(dst, expected) << rows << " rows of " << size << ", strides " << src_stride << " and " << dst_stride;
  }
}

TEST(CopyRowsTogether, EveryCopysRowsArriveWhateverTheirAlignment) {
  // The strips a shard sends to several devices: copies at neighbouring
  // offsets of the same rows, each into rows of its own. Sizes and
  // destinations of whole 32-byte words (the fused streaming kernel) in half
  // the trials, anything in the rest; the bytes between rows stay untouched.
  auto rng = testing::seeded_rng();
  for (int trial = 0; trial < 300; ++trial) {
    const bool words = trial % 2 == 0;
    const size_t copies = 1 + rng() % 16, rows = 1 + rng() % 40;
    const size_t size = words ? 32 * (1 + rng() % 12) : 1 + rng() % 400;
    const size_t row_bytes = copies * size + rng() % 100;
    const Bytes src = random_bytes(rng, rows * row_bytes);
    const size_t dst_stride = words ? size + 32 * (rng() % 3) : size + rng() % 40;
    const size_t dst_bytes = rows * dst_stride + 64;
    std::vector<Bytes> dsts(copies, Bytes(dst_bytes + 32, std::byte{0x5A}));
    std::vector<Bytes> expected = dsts;
    std::vector<RowsCopy> list;
    for (size_t c = 0; c < copies; ++c) {
      // 32-byte aligned destinations for the word trials.
      const size_t skew = (32 - reinterpret_cast<uintptr_t>(dsts[c].data()) % 32) % 32 + (words ? 0 : rng() % 7);
      list.push_back({dsts[c].data() + skew, static_cast<int64_t>(dst_stride), src.data() + c * size,
                      static_cast<int64_t>(row_bytes)});
      for (size_t r = 0; r < rows; ++r) {
        std::memcpy(expected[c].data() + skew + r * dst_stride, src.data() + r * row_bytes + c * size, size);
      }
    }
    const auto mode = rng() % 4 == 0 ? CopyMode::kCached : CopyMode::kStreaming;
    copy_rows_together(list, size, rows, mode);
    finish_streaming();
    for (size_t c = 0; c < copies; ++c) {
      ASSERT_EQ(dsts[c], expected[c]) << "trial " << trial << ": copy " << c << " of " << copies << ", " << rows
                                      << " rows of " << size;
    }
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
}  // namespace reshard::execute_detail
