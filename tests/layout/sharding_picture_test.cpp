// draw_sharding on 1-D and 2-D arrays, drawn as jax.debug.visualize_array_sharding
// draws them (other ranks: sharding_picture_ranks_test.cpp).
#include "reshard/layout/sharding_picture.h"

#include <random>
#include <set>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "layout/support/draw_layout.h"
#include "layout/support/picture_text.h"
#include "support/seed.h"

namespace reshard::testing {
namespace {

std::vector<size_t> line_widths(const std::string& text) {
  std::vector<size_t> out;
  for (const std::string& line : lines_of(text)) out.push_back(columns(line));
  return out;
}

TEST(ShardingPicture, EmptyArraysHaveNoPicture) {
  EXPECT_FALSE(draw({{"x", 2}}, "x", {0}).text.has_value());
  EXPECT_FALSE(draw({{"x", 2}}, "x", {4, 0}).text.has_value());
  EXPECT_FALSE(draw({{"x", 2}}, "x", {2, 0, 2}).text.has_value());
  EXPECT_TRUE(draw({{"x", 2}}, "x", {4}).text.has_value());
}

TEST(ShardingPicture, TooManyBlocksIsNoPicture) {
  EXPECT_FALSE(draw({{"x", 64}}, "x", {64}).text.has_value());
  EXPECT_TRUE(draw({{"x", 32}}, "x", {64}).text.has_value());
}

TEST(ShardingPicture, NoColourUnlessAsked) {
  const Drawn plain = draw({{"x", 2}, {"y", 2}}, "x,y", {4, 4});
  EXPECT_EQ(plain.text->find('\x1b'), std::string::npos);
  const Drawn coloured = draw({{"x", 2}, {"y", 2}}, "x,y", {4, 4}, false, {.color = true});
  // Four blocks, four different backgrounds.
  std::set<int64_t> backgrounds;
  const std::string code = "\x1b[48;5;";
  for (size_t at = coloured.text->find(code); at != std::string::npos; at = coloured.text->find(code, at + 1)) {
    backgrounds.insert(numbers_in(coloured.text->substr(at + code.size(), 3)).front());
  }
  EXPECT_EQ(backgrounds.size(), 4u);
  EXPECT_EQ(line_widths(*coloured.text), line_widths(*plain.text));  // colour adds no columns
}

TEST(ShardingPicture, TallArraysAreNarrowAndWideArraysShort) {
  const Drawn tall = draw({{"x", 2}}, "x", {4096, 8});
  const Drawn wide = draw({{"x", 2}}, "None,x", {8, 4096});
  ASSERT_TRUE(tall.text && wide.text);
  EXPECT_LT(line_widths(*tall.text).front(), 30u);
  EXPECT_GE(line_widths(*wide.text).front(), 70u);
  EXPECT_GT(line_widths(*tall.text).size(), line_widths(*wide.text).size());
}

TEST(ShardingPicture, LongLabelsWrapInsideTheirBlock) {
  const Drawn d = draw({{"x", 2}, {"r", 32}}, "x", {4, 4});  // 32 devices on each of 2 blocks
  ASSERT_TRUE(d.text);
  const std::vector<size_t> widths = line_widths(*d.text);
  for (size_t w : widths) EXPECT_EQ(w, widths.front()) << *d.text;
  std::multiset<int64_t> want(d.devices.begin(), d.devices.end());
  EXPECT_EQ(labelled_numbers(*d.text), want) << *d.text;
}

// Ranks 1 and 2 stay JAX's picture: no caption, and the ids as labels unless
// told otherwise, so labels equal to the ids change nothing.
TEST(ShardingPicture, RanksOneAndTwoHaveNoCaption) {
  const Drawn one = draw({{"x", 4}}, "x", {8});
  const Drawn two = draw({{"x", 2}, {"y", 2}}, "None,y", {8, 4});
  EXPECT_EQ(one.text->rfind("┌", 0), 0u) << *one.text;
  EXPECT_EQ(two.text->rfind("┌", 0), 0u) << *two.text;
  // Dimension 0 of the 2-D array is whole and still drawn as JAX draws it: one row.
  EXPECT_EQ(count_of(*two.text, "├"), 0u);
  EXPECT_EQ(count_of(*two.text, "CPU"), 2u);
  const PictureStyle ids{.labels = {"0", "1", "2", "3"}};
  EXPECT_EQ(draw_sharding({8}, one.boxes, one.devices, ids), one.text);
  EXPECT_EQ(draw_sharding({8, 4}, two.boxes, two.devices, ids), two.text);
}

// Random 1-D and 2-D layouts: a rectangular picture that names every device
// holding a non-empty slice exactly once, with one block per distinct slice.
TEST(ShardingPicture, RandomLayoutsDrawEveryHolderOnce) {
  std::mt19937_64 rng = seeded_rng();
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t x = 1 + static_cast<int64_t>(rng() % 6), y = 1 + static_cast<int64_t>(rng() % 5);
    const size_t rank = 1 + rng() % 2;
    static constexpr std::string_view kSpecs1[] = {"", "x", "y", "(x,y)", "(y,x)"};
    static constexpr std::string_view kSpecs2[] = {"", "x", "None,y", "x,y", "y,x", "(x,y)", "None,(y,x)"};
    const std::string_view spec = rank == 1 ? kSpecs1[rng() % 5] : kSpecs2[rng() % 7];
    Shape shape;
    for (size_t d = 0; d < rank; ++d) shape.push_back(1 + static_cast<int64_t>(rng() % 40));
    const Drawn d = draw({{"x", x}, {"y", y}}, spec, shape, true, {.color = rng() % 2 == 0});
    SCOPED_TRACE(fmt::format("x={} y={} spec '{}' shape ({}) uneven", x, y, spec, fmt::join(shape, ", ")));
    ASSERT_TRUE(d.text.has_value());
    const std::vector<size_t> widths = line_widths(*d.text);
    for (size_t w : widths) ASSERT_EQ(w, widths.front()) << *d.text;
    std::multiset<int64_t> holders;
    std::set<std::pair<std::vector<int64_t>, Shape>> distinct;
    for (size_t i = 0; i < d.boxes.size(); ++i) {
      if (d.boxes[i].empty()) continue;
      holders.insert(d.devices[i]);
      distinct.insert({d.boxes[i].origin(), d.boxes[i].shape()});
    }
    ASSERT_EQ(labelled_numbers(*d.text), holders) << *d.text;
    ASSERT_EQ(count_of(*d.text, "CPU"), distinct.size()) << *d.text;
  }
}

}  // namespace
}  // namespace reshard::testing
