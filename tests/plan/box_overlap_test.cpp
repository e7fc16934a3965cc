// find_overlap against comparing every pair.
#include "plan/box_overlap.h"

#include <gtest/gtest.h>

#include "support/seed.h"

namespace reshard {

using plan_detail::find_overlap;

namespace {

Box box(std::vector<int64_t> origin, Shape shape) { return Box(std::move(origin), std::move(shape)); }

bool overlap(const Box& a, const Box& b) { return !a.intersect(b).empty(); }

TEST(FindOverlap, DisjointGridHasNone) {
  std::vector<Box> grid;
  for (int64_t i = 0; i < 8; ++i) {
    for (int64_t j = 0; j < 8; ++j) grid.push_back(box({2 * i, 3 * j}, {2, 3}));
  }
  EXPECT_EQ(find_overlap(grid), std::nullopt);
}

TEST(FindOverlap, FindsTheOverlappingPair) {
  const std::vector<Box> boxes = {box({0, 0}, {2, 2}), box({2, 0}, {2, 2}), box({0, 2}, {4, 2}),
                                  box({3, 3}, {1, 1})};
  EXPECT_EQ(find_overlap(boxes), (std::pair<size_t, size_t>{2, 3}));
}

TEST(FindOverlap, TouchingIsNotOverlapping) {
  EXPECT_EQ(find_overlap(std::vector<Box>{box({0}, {4}), box({4}, {4})}), std::nullopt);
  EXPECT_NE(find_overlap(std::vector<Box>{box({0}, {5}), box({4}, {4})}), std::nullopt);
}

TEST(FindOverlap, EmptyBoxesOverlapNothing) {
  EXPECT_EQ(find_overlap(std::vector<Box>{box({0, 0}, {4, 4}), box({1, 1}, {0, 2})}), std::nullopt);
}

TEST(FindOverlap, ScalarsAlwaysOverlap) {
  EXPECT_EQ(find_overlap(std::vector<Box>{box({}, {})}), std::nullopt);
  EXPECT_EQ(find_overlap(std::vector<Box>{box({}, {}), box({}, {})}), (std::pair<size_t, size_t>{0, 1}));
}

TEST(FindOverlap, AgreesWithComparingEveryPair) {
  std::mt19937_64 rng = testing::seeded_rng();
  std::uniform_int_distribution<int64_t> coord(0, 9);
  std::uniform_int_distribution<int64_t> extent(0, 4);
  int found = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const size_t rank = static_cast<size_t>(trial % 4);
    std::vector<Box> boxes;
    for (int64_t n = trial % 7; n > 0; --n) {
      std::vector<int64_t> origin(rank);
      Shape shape(rank);
      for (size_t d = 0; d < rank; ++d) {
        origin[d] = coord(rng);
        shape[d] = extent(rng);
      }
      boxes.push_back(box(origin, shape));
    }
    bool any = false;
    for (size_t i = 0; i < boxes.size(); ++i) {
      for (size_t j = i + 1; j < boxes.size(); ++j) any |= overlap(boxes[i], boxes[j]);
    }
    const auto pair = find_overlap(boxes);
    ASSERT_EQ(pair.has_value(), any) << "trial " << trial;
    if (pair) {
      ASSERT_LT(pair->first, pair->second);
      EXPECT_TRUE(overlap(boxes[pair->first], boxes[pair->second])) << "trial " << trial;
      ++found;
    }
  }
  EXPECT_GT(found, 100);
}

}  // namespace
}  // namespace reshard
