#include "reshard/layout/box.h"

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "layout/support/printers.h"
#include "support/seed.h"

namespace reshard {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Every index of `box`, in row-major order.
std::vector<std::vector<int64_t>> indices_of(const Box& box) {
  std::vector<std::vector<int64_t>> out;
  if (box.empty()) return out;
  std::vector<int64_t> index = box.origin();
  while (true) {
    out.push_back(index);
    size_t d = box.rank();
    while (true) {
      if (d == 0) return out;
      --d;
      if (++index[d] < box.origin()[d] + box.shape()[d]) break;
      index[d] = box.origin()[d];
    }
  }
}

bool holds(const Box& box, const std::vector<int64_t>& index) {
  for (size_t d = 0; d < box.rank(); ++d) {
    if (index[d] < box.origin()[d] || index[d] >= box.origin()[d] + box.shape()[d]) return false;
  }
  return true;
}

// Runs found the slow way: each element's offset, merged while consecutive.
std::vector<reshard::Run> brute_force_runs(const Box& array, const Box& sub) {
  std::vector<reshard::Run> runs;
  for (const std::vector<int64_t>& index : indices_of(sub)) {
    int64_t offset = 0;
    for (size_t d = 0; d < array.rank(); ++d) offset = offset * array.shape()[d] + (index[d] - array.origin()[d]);
    if (!runs.empty() && runs.back().offset + runs.back().length == offset) {
      ++runs.back().length;
    } else {
      runs.push_back({offset, 1});
    }
  }
  return runs;
}

Box random_box(std::mt19937_64& rng, size_t rank, int64_t max_extent) {
  std::uniform_int_distribution<int64_t> origin(-3, 3), extent(0, max_extent);
  std::vector<int64_t> o(rank);
  Shape s(rank);
  for (size_t d = 0; d < rank; ++d) {
    o[d] = origin(rng);
    s[d] = extent(rng);
  }
  return Box(o, s);
}

// A random box inside `outer` (possibly empty, possibly all of it).
Box random_sub_box(std::mt19937_64& rng, const Box& outer) {
  std::vector<int64_t> o(outer.rank());
  Shape s(outer.rank());
  for (size_t d = 0; d < outer.rank(); ++d) {
    std::uniform_int_distribution<int64_t> a(0, outer.shape()[d]);
    int64_t lo = a(rng), hi = a(rng);
    if (lo > hi) std::swap(lo, hi);
    if (rng() % 3 == 0) {  // favour whole dimensions: they are what runs merge
      lo = 0;
      hi = outer.shape()[d];
    }
    o[d] = outer.origin()[d] + lo;
    s[d] = hi - lo;
  }
  return Box(o, s);
}

TEST(Interval, Intersect) {
  EXPECT_EQ(intersect({0, 5}, {3, 8}), (Interval{3, 5}));
  EXPECT_EQ(intersect({3, 8}, {0, 5}), (Interval{3, 5}));
  EXPECT_EQ(intersect({0, 8}, {2, 4}), (Interval{2, 4}));
  EXPECT_EQ(intersect({0, 2}, {2, 4}).size(), 0);
  EXPECT_EQ(intersect({5, 6}, {0, 2}).size(), 0);
  EXPECT_GE(intersect({5, 6}, {0, 2}).size(), 0);  // never negative
}

TEST(Box, ConstructionChecksItsArguments) {
  EXPECT_TRUE(testing::throws_error([] { Box({0, 0}, {1}); }, ErrorCode::kInvalidArgument, {"rank 2", "rank 1"}));
  EXPECT_TRUE(testing::throws_error([] { Box({0, 0}, {2, -1}); }, ErrorCode::kInvalidArgument, {"1", "-1"}));
  EXPECT_TRUE(testing::throws_error([] { Box({kMax - 1}, {2}); }, ErrorCode::kOverflow));
  EXPECT_NO_THROW(Box({kMax - 2}, {2}));
}

TEST(Box, WholeFromIntervalsAndAccessors) {
  const Box whole = Box::whole({2, 3});
  EXPECT_EQ(whole.origin(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(whole.shape(), (Shape{2, 3}));
  const std::vector<Interval> parts = {{1, 4}, {2, 2}};
  const Box b = Box::from_intervals(parts);
  EXPECT_EQ(b.origin(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(b.shape(), (Shape{3, 0}));
  EXPECT_EQ(b.interval(0), (Interval{1, 4}));
  EXPECT_TRUE(b.empty());
  EXPECT_FALSE(whole.empty());
  EXPECT_EQ(b.to_string(), "[1:4, 2:2]");
  EXPECT_EQ(Box().to_string(), "[]");
}

TEST(Box, Volume) {
  EXPECT_EQ(Box::whole({2, 3, 4}).volume(), 24);
  EXPECT_EQ(Box::whole({2, 0, 4}).volume(), 0);
  EXPECT_EQ(Box::whole({}).volume(), 1);  // a scalar has one element
  EXPECT_FALSE(Box::whole({}).empty());
  EXPECT_TRUE(testing::throws_error([] { Box::whole({int64_t{1} << 32, int64_t{1} << 32}).volume(); },
                                    ErrorCode::kOverflow));
}

TEST(Box, Containment) {
  const Box outer({0, 0}, {4, 4});
  EXPECT_TRUE(outer.contains(outer));
  EXPECT_TRUE(outer.contains(Box({1, 1}, {3, 3})));
  EXPECT_FALSE(outer.contains(Box({1, 1}, {4, 3})));
  EXPECT_FALSE(outer.contains(Box({-1, 0}, {1, 1})));
  EXPECT_TRUE(outer.contains(Box({100, 100}, {0, 5})));  // the empty box is everywhere
  EXPECT_FALSE(outer.contains(Box({0}, {1})));            // other rank
}

TEST(Box, RelativeTo) {
  EXPECT_EQ(Box({5, 7}, {2, 3}).relative_to(Box({4, 4}, {9, 9})), Box({1, 3}, {2, 3}));
  EXPECT_TRUE(testing::throws_error([] { Box({5, 7}, {2, 3}).relative_to(Box({4}, {9})); },
                                    ErrorCode::kInvalidArgument));
  EXPECT_TRUE(testing::throws_error(
      [] { Box({kMax - 1}, {1}).relative_to(Box({std::numeric_limits<int64_t>::min()}, {1})); },
      ErrorCode::kOverflow));
}

TEST(Box, IntersectRejectsOtherRanks) {
  EXPECT_TRUE(testing::throws_error([] { Box::whole({2}).intersect(Box::whole({2, 2})); },
                                    ErrorCode::kInvalidArgument));
}

TEST(Box, IntersectionVolumeAndContainmentAgreeWithElements) {
  std::mt19937_64 rng = testing::seeded_rng();
  for (int trial = 0; trial < 300; ++trial) {
    const size_t rank = rng() % 4;
    const Box a = random_box(rng, rank, 5);
    const Box b = random_box(rng, rank, 5);
    const Box both = a.intersect(b);
    EXPECT_EQ(both, b.intersect(a));
    int64_t common = 0;
    for (const auto& index : indices_of(a)) {
      if (holds(b, index)) {
        ++common;
        EXPECT_TRUE(holds(both, index));
      }
    }
    EXPECT_EQ(both.volume(), common) << a.to_string() << " & " << b.to_string();
    EXPECT_EQ(both.empty(), common == 0);
    EXPECT_EQ(a.volume(), static_cast<int64_t>(indices_of(a).size()));
    bool all_in = true;
    for (const auto& index : indices_of(b)) all_in &= holds(a, index);
    EXPECT_EQ(a.contains(b), all_in) << a.to_string() << " contains " << b.to_string();
    EXPECT_TRUE(a.contains(both));
    EXPECT_TRUE(b.contains(both));
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(RowMajorStrides, Values) {
  EXPECT_EQ(row_major_strides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(row_major_strides({7}), (std::vector<int64_t>{1}));
  EXPECT_EQ(row_major_strides({}), (std::vector<int64_t>{}));
  EXPECT_EQ(row_major_strides({5, 0, 3}), (std::vector<int64_t>{0, 3, 1}));
  EXPECT_TRUE(testing::throws_error([] { row_major_strides({int64_t{1} << 40, int64_t{1} << 40}); },
                                    ErrorCode::kOverflow));
}

TEST(RowMajorStrides, MatchElementOffsets) {
  const Shape shape = {3, 4, 5};
  const std::vector<int64_t> strides = row_major_strides(shape);
  int64_t expected_offset = 0;
  for (const auto& index : indices_of(Box::whole(shape))) {
    int64_t offset = 0;
    for (size_t d = 0; d < shape.size(); ++d) offset += index[d] * strides[d];
    EXPECT_EQ(offset, expected_offset++);
  }
}

TEST(ContiguousRuns, KnownCases) {
  const Box array = Box::whole({4, 6});
  EXPECT_EQ(contiguous_runs(array, array), (std::vector<reshard::Run>{{0, 24}}));
  EXPECT_EQ(contiguous_runs(array, Box({1, 0}, {2, 6})), (std::vector<reshard::Run>{{6, 12}}));  // whole rows merge
  EXPECT_EQ(contiguous_runs(array, Box({1, 2}, {2, 3})), (std::vector<reshard::Run>{{8, 3}, {14, 3}}));
  EXPECT_EQ(contiguous_runs(array, Box({0, 5}, {4, 1})), (std::vector<reshard::Run>{{5, 1}, {11, 1}, {17, 1}, {23, 1}}));
  EXPECT_TRUE(contiguous_runs(array, Box({2, 2}, {0, 3})).empty());
  EXPECT_EQ(contiguous_runs(Box::whole({}), Box::whole({})), (std::vector<reshard::Run>{{0, 1}}));  // a scalar
  // Coordinates are global: the array itself may start anywhere.
  EXPECT_EQ(contiguous_runs(Box({10, 20}, {2, 3}), Box({11, 21}, {1, 2})), (std::vector<reshard::Run>{{4, 2}}));
}

TEST(ContiguousRuns, RejectsABoxOutsideTheArray) {
  EXPECT_TRUE(testing::throws_error([] { contiguous_runs(Box::whole({4, 4}), Box({2, 2}, {3, 1})); },
                                    ErrorCode::kInvalidArgument, {"[2:5, 2:3]", "[0:4, 0:4]"}));
  EXPECT_TRUE(testing::throws_error([] { contiguous_runs(Box::whole({4, 4}), Box::whole({4})); },
                                    ErrorCode::kInvalidArgument));
}

TEST(ContiguousRuns, MatchPerElementEnumerationOnRandomBoxes) {
  std::mt19937_64 rng = testing::seeded_rng();
  for (int trial = 0; trial < 500; ++trial) {
    const size_t rank = rng() % 5;
    Box array = random_box(rng, rank, 5);
    const Box sub = random_sub_box(rng, array);
    const std::vector<reshard::Run> runs = contiguous_runs(array, sub);
    ASSERT_EQ(runs, brute_force_runs(array, sub)) << sub.to_string() << " in " << array.to_string();
    std::vector<reshard::Run> visited;
    for_each_run(array, sub, [&](reshard::Run r) { visited.push_back(r); });
    ASSERT_EQ(visited, runs);
  }
}

}  // namespace
}  // namespace reshard
