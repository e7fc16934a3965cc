#include "layout/box_copy.h"

#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support/seed.h"
#include "reshard/layout/error.h"

namespace reshard {

using layout_detail::BoxCopy;

namespace {

using Bytes = std::vector<std::byte>;

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

Box random_box_inside(std::mt19937_64& rng, const Box& outer) {
  std::vector<int64_t> origin, shape;
  for (size_t d = 0; d < outer.rank(); ++d) {
    const int64_t begin = uniform(rng, outer.interval(d).begin, outer.interval(d).end - 1);
    origin.push_back(begin);
    shape.push_back(uniform(rng, 1, outer.interval(d).end - begin));
  }
  return Box(origin, shape);
}

// A random extent around `box` (what a shard holding it might cover).
Box random_extent_around(std::mt19937_64& rng, const Box& box) {
  std::vector<int64_t> origin, shape;
  for (size_t d = 0; d < box.rank(); ++d) {
    const int64_t before = uniform(rng, 0, 2), after = uniform(rng, 0, 2);
    origin.push_back(box.origin()[d] - before);
    shape.push_back(box.shape()[d] + before + after);
  }
  return Box(origin, shape);
}

// A random box of 1 to 4 dimensions, elements of 1 to 8 bytes, and random
// buffers around it on both sides.
struct CopyCase {
  size_t width;
  Box box, src_extent, dst_extent;
};
CopyCase random_copy_case(std::mt19937_64& rng) {
  const size_t width = size_t{1} << uniform(rng, 0, 3);
  Shape shape(static_cast<size_t>(uniform(rng, 1, 4)));
  for (int64_t& s : shape) s = uniform(rng, 1, 7);
  const Box box = random_box_inside(rng, Box::whole(shape));
  const Box src_extent = random_extent_around(rng, box);
  return CopyCase{width, box, src_extent, random_extent_around(rng, box)};
}

Bytes numbered(size_t size) {
  Bytes out(size);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<std::byte>((i * 7 + 3) & 0xff);
  return out;
}

size_t offset_in(const Box& extent, const std::vector<int64_t>& index) {
  const std::vector<int64_t> strides = row_major_strides(extent.shape());
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset += (index[d] - extent.origin()[d]) * strides[d];
  return static_cast<size_t>(offset);
}

// The copy done one element at a time: what BoxCopy must equal.
void copy_elementwise(const Box& box, const Box& src_extent, const Bytes& src, const Box& dst_extent, Bytes& dst,
                      size_t width) {
  std::vector<int64_t> index = box.origin();
  for (int64_t n = 0; n < box.volume(); ++n) {
    std::memcpy(dst.data() + offset_in(dst_extent, index) * width, src.data() + offset_in(src_extent, index) * width,
                width);
    for (size_t d = box.rank(); d-- > 0;) {
      if (++index[d] < box.interval(d).end) break;
      index[d] = box.origin()[d];
    }
  }
}

TEST(BoxCopy, MatchesElementwiseCopyOnRandomBoxes) {
  auto rng = testing::seeded_rng();
  for (int trial = 0; trial < 300; ++trial) {
    const auto [width, box, src_extent, dst_extent] = random_copy_case(rng);
    const Bytes src = numbered(static_cast<size_t>(src_extent.volume()) * width);
    Bytes expected(static_cast<size_t>(dst_extent.volume()) * width), actual = expected;
    copy_elementwise(box, src_extent, src, dst_extent, expected, width);
    const BoxCopy copy(box, src_extent, dst_extent, width);
    ASSERT_EQ(copy.bytes(), static_cast<uint64_t>(box.volume()) * width);
    // In two uneven halves, as threads and messages split it.
    const uint64_t cut = static_cast<uint64_t>(uniform(rng, 0, static_cast<int64_t>(copy.bytes())));
    copy.copy(src.data(), actual.data(), 0, cut);
    copy.copy(src.data(), actual.data(), cut, copy.bytes());
    ASSERT_EQ(actual, expected) << "box " << box.to_string() << " from " << src_extent.to_string() << " to "
                                << dst_extent.to_string() << " cut at " << cut;
  }
}

TEST(BoxCopy, PackThenUnpackInPiecesEqualsCopy) {
  auto rng = testing::seeded_rng();
  for (int trial = 0; trial < 200; ++trial) {
    const Box box({2, 0, 1}, {uniform(rng, 1, 4), uniform(rng, 1, 5), uniform(rng, 1, 3)});
    const Box src_extent = random_extent_around(rng, box), dst_extent = random_extent_around(rng, box);
    const size_t width = 2;
    const Bytes src = numbered(static_cast<size_t>(src_extent.volume()) * width);
    Bytes expected(static_cast<size_t>(dst_extent.volume()) * width), actual = expected;
    BoxCopy(box, src_extent, dst_extent, width).copy(src.data(), expected.data());
    const BoxCopy sender(box, src_extent, box, width), receiver(box, box, dst_extent, width);
    for (uint64_t begin = 0; begin < sender.bytes();) {
      const uint64_t end = std::min(sender.bytes(), begin + static_cast<uint64_t>(uniform(rng, 1, 9)));
      Bytes message(end - begin);
      sender.pack(src.data(), begin, end, message.data());
      receiver.unpack(message.data(), begin, end, actual.data());
      begin = end;
    }
    ASSERT_EQ(actual, expected);
  }
}

// Runs as (offset, size) from `base`, neighbours in memory merged.
template <typename Run>
std::vector<std::pair<int64_t, uint64_t>> canonical_runs(const std::vector<Run>& runs, const std::byte* base) {
  std::vector<std::pair<int64_t, uint64_t>> out;
  for (const Run& r : runs) {
    if (r.size == 0) continue;
    const int64_t offset = r.data - base;
    if (!out.empty() && out.back().first + static_cast<int64_t>(out.back().second) == offset) {
      out.back().second += r.size;
    } else {
      out.emplace_back(offset, r.size);
    }
  }
  return out;
}

template <typename Rows>
std::vector<ConstByteRun> expanded(const std::vector<Rows>& rows) {
  std::vector<ConstByteRun> runs;
  for (const Rows& r : rows) {
    for (uint64_t i = 0; i < r.count; ++i) runs.push_back({r.data + static_cast<int64_t>(i) * r.stride, r.size});
  }
  return runs;
}

TEST(BoxCopy, RowsHoldTheSameRunsAsTheRunLists) {
  auto rng = testing::seeded_rng();
  for (int trial = 0; trial < 300; ++trial) {
    const auto [width, box, src_extent, dst_extent] = random_copy_case(rng);
    Bytes src(static_cast<size_t>(src_extent.volume()) * width), dst(static_cast<size_t>(dst_extent.volume()) * width);
    const BoxCopy copy(box, src_extent, dst_extent, width);
    const auto bytes = static_cast<int64_t>(copy.bytes());
    const auto begin_at = uniform(rng, 0, bytes);
    const uint64_t begin = static_cast<uint64_t>(begin_at), end = static_cast<uint64_t>(uniform(rng, begin_at, bytes));
    std::vector<ConstByteRun> src_runs;
    std::vector<ByteRun> dst_runs;
    std::vector<ConstRunRows> src_rows;
    std::vector<RunRows> dst_rows;
    copy.src_runs(src.data(), begin, end, src_runs);
    copy.dst_runs(dst.data(), begin, end, dst_runs);
    copy.src_rows(src.data(), begin, end, src_rows);
    copy.dst_rows(dst.data(), begin, end, dst_rows);
    const std::string where = "box " + box.to_string() + " from " + src_extent.to_string() + " to " +
                              dst_extent.to_string() + " bytes [" + std::to_string(begin) + ", " +
                              std::to_string(end) + ")";
    EXPECT_EQ(canonical_runs(expanded(src_rows), src.data()), canonical_runs(src_runs, src.data())) << where;
    EXPECT_EQ(canonical_runs(expanded(dst_rows), dst.data()), canonical_runs(dst_runs, dst.data())) << where;
    EXPECT_LE(src_rows.size(), src_runs.size()) << where;
    EXPECT_LE(dst_rows.size(), dst_runs.size()) << where;
  }
}

TEST(BoxCopy, AStridedBoxIsOneRowsEntryWhateverItsRowCount) {
  // Columns 64:128 of a 1000 x 1024 bf16 matrix, into a buffer of their own.
  const Box box({0, 64}, {1000, 64});
  const BoxCopy copy(box, Box::whole({1000, 1024}), box, 2);
  std::vector<ConstRunRows> rows;
  const Bytes src(1000 * 1024 * 2);
  copy.src_rows(src.data(), 0, copy.bytes(), rows);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].data, src.data() + 128);
  EXPECT_EQ(rows[0].size, 128u);
  EXPECT_EQ(rows[0].stride, 2048);
  EXPECT_EQ(rows[0].count, 1000u);
  // Contiguous in the destination: one run.
  Bytes dst(1000 * 64 * 2);
  std::vector<RunRows> into;
  copy.dst_rows(dst.data(), 100, copy.bytes() - 100, into);
  ASSERT_EQ(into.size(), 1u);
  EXPECT_EQ(into[0].data, dst.data() + 100);
  EXPECT_EQ(into[0].size * into[0].count, copy.bytes() - 200);
}

TEST(BoxCopy, MergesWhatIsContiguousInBothBuffers) {
  // Whole rows of both extents: one run.
  EXPECT_EQ(BoxCopy(Box({2, 0}, {3, 8}), Box({0, 0}, {8, 8}), Box({2, 0}, {4, 8}), 4).row_bytes(), 3u * 8 * 4);
  // A column slice: rows as long as the narrower side.
  EXPECT_EQ(BoxCopy(Box({0, 4}, {8, 4}), Box({0, 0}, {8, 8}), Box({0, 4}, {8, 4}), 4).row_bytes(), 4u * 4);
  // Size-1 dimensions vanish: [1, 5] inside [4, 5] is one run.
  EXPECT_EQ(BoxCopy(Box({3, 0}, {1, 5}), Box({0, 0}, {4, 5}), Box({3, 0}, {1, 5}), 1).row_bytes(), 5u);
}

TEST(BoxCopy, ReportsContiguousRangesForInPlaceMessages) {
  const BoxCopy copy(Box({0, 4}, {8, 4}), Box({0, 0}, {8, 8}), Box({0, 4}, {8, 4}), 4);
  // Bytes 16..31 are row 1 of the box: elements [1, 4:8] at source offset 12 elements.
  EXPECT_EQ(copy.contiguous_in_src(16, 32), std::optional<uint64_t>(48));
  EXPECT_EQ(copy.contiguous_in_dst(16, 32), std::optional<uint64_t>(16));
  EXPECT_EQ(copy.contiguous_in_src(8, 24), std::nullopt);  // spans two rows
}

TEST(BoxCopy, RejectsBoxesOutsideTheirBuffersAndRangesPastTheEnd) {
  EXPECT_THROW(BoxCopy(Box({0}, {5}), Box({1}, {8}), Box({0}, {8}), 4), Error);
  EXPECT_THROW(BoxCopy(Box({0}, {5}), Box({0}, {8}), Box({0}, {4}), 4), Error);
  const BoxCopy copy(Box({0}, {2}), Box({0}, {2}), Box({0}, {2}), 4);
  Bytes buffer(8);
  EXPECT_THROW(copy.copy(buffer.data(), buffer.data(), 0, 9), Error);
}

TEST(BoxCopy, EmptyAndScalarBoxes) {
  EXPECT_EQ(BoxCopy(Box({0, 2}, {3, 0}), Box({0, 0}, {3, 4}), Box({0, 0}, {3, 4}), 4).bytes(), 0u);
  const BoxCopy scalar(Box({}, {}), Box({}, {}), Box({}, {}), 8);
  const Bytes src = numbered(8);
  Bytes dst(8);
  scalar.copy(src.data(), dst.data());
  EXPECT_EQ(dst, src);
}

}  // namespace
}  // namespace reshard
