// draw_sharding on arrays of rank 0 and 3 or more: the split dimensions drawn,
// the whole ones named in the caption; caller-given labels; bad arguments.
#include "reshard/layout/sharding_picture.h"

#include <algorithm>
#include <random>
#include <set>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "layout/support/draw_layout.h"
#include "layout/support/expect_error.h"
#include "layout/support/picture_text.h"
#include "support/seed.h"

namespace reshard::testing {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The lines of a grid (those that start with a border), by columns.
std::set<size_t> grid_line_widths(const std::string& text) {
  std::set<size_t> out;
  for (const std::string& line : lines_of(text)) {
    for (const char* left : {"┌", "│", "├", "└"}) {
      if (line.rfind(left, 0) == 0) out.insert(columns(line));
    }
  }
  return out;
}

std::vector<std::string> headings(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& line : lines_of(text)) {
    if (line.rfind("dim ", 0) == 0) out.push_back(line);
  }
  return out;
}

TEST(ShardingPictureRanks, TheSeedsArrayShowsItsSplitDimensions) {
  const Drawn d = draw({{"a", 2}, {"b", 4}}, "None,a,b", {32, 8, 4096}, false, {.dtype = "bf16"});
  ASSERT_TRUE(d.text) << "no picture";
  EXPECT_EQ(first_line(*d.text), "[32, 8, 4096] bf16: dim 0 (32) whole; rows: dim 1 split 2, columns: dim 2 split 4");
  // A 2 x 4 grid: two rows of four blocks, devices in mesh order along the rows.
  EXPECT_EQ(count_of(*d.text, "┬"), 3u) << *d.text;
  EXPECT_EQ(count_of(*d.text, "├"), 1u) << *d.text;
  EXPECT_LT(d.text->find("CPU 3"), d.text->find("CPU 4"));
  EXPECT_EQ(labelled_numbers(*d.text), std::multiset<int64_t>(d.devices.begin(), d.devices.end()));
  EXPECT_EQ(grid_line_widths(*d.text).size(), 1u) << *d.text;
}

TEST(ShardingPictureRanks, OneSplitDimensionIsARowOfBlocks) {
  const Drawn d = draw({{"x", 4}, {"r", 2}}, "None,x", {2, 8, 4});
  ASSERT_TRUE(d.text);
  EXPECT_EQ(first_line(*d.text), "[2, 8, 4]: dims 0 (2), 2 (4) whole; columns: dim 1 split 4");
  EXPECT_EQ(count_of(*d.text, "├"), 0u);
  EXPECT_EQ(count_of(*d.text, "CPU"), 4u);
  EXPECT_NE(d.text->find("CPU 0,1"), std::string::npos) << *d.text;  // r replicates each slice on 2 devices
}

TEST(ShardingPictureRanks, ReplicatedArraysAndScalarsAreOneBlock) {
  const Drawn replicated = draw({{"x", 4}}, "", {2, 3, 5});
  ASSERT_TRUE(replicated.text);
  EXPECT_EQ(first_line(*replicated.text), "[2, 3, 5]: dims 0 (2), 1 (3), 2 (5) whole");
  EXPECT_EQ(count_of(*replicated.text, "CPU"), 1u);
  EXPECT_NE(replicated.text->find("CPU 0,1,2,3"), std::string::npos) << *replicated.text;
  const Drawn scalar = draw({{"x", 2}}, "", {}, false, {.dtype = "f32"});
  ASSERT_TRUE(scalar.text);
  EXPECT_EQ(first_line(*scalar.text), "[] f32: a scalar");
  EXPECT_NE(scalar.text->find("CPU 0,1"), std::string::npos) << *scalar.text;
  EXPECT_EQ(grid_line_widths(*scalar.text).size(), 1u);
}

TEST(ShardingPictureRanks, MoreSplitDimensionsGetAGridPerLeadingSlice) {
  const Drawn d = draw({{"a", 2}, {"b", 2}, {"c", 2}}, "a,b,c", {16, 32, 8, 4096});
  ASSERT_TRUE(d.text);
  EXPECT_EQ(first_line(*d.text),
            "[16, 32, 8, 4096]: dim 3 (4096) whole; grids: dim 0 split 2; rows: dim 1 split 2, columns: dim 2 split 2");
  EXPECT_EQ(headings(*d.text), (std::vector<std::string>{"dim 0 [0:8]", "dim 0 [8:16]"}));
  // Devices 0-3 hold dim 0's first half, 4-7 its second: each in its own grid.
  const size_t second = d.text->find("dim 0 [8:16]");
  EXPECT_LT(d.text->find("CPU 3"), second);
  EXPECT_GT(d.text->find("CPU 4"), second);
  EXPECT_EQ(count_of(*d.text, "CPU"), 8u);
  EXPECT_EQ(grid_line_widths(*d.text).size(), 1u) << "the grids line up";

  const Drawn four = draw({{"a", 2}, {"b", 2}, {"c", 2}, {"d", 2}}, "a,b,c,d", {2, 2, 2, 2});
  ASSERT_TRUE(four.text);
  EXPECT_EQ(headings(*four.text), (std::vector<std::string>{"dim 0 [0:1], dim 1 [0:1]", "dim 0 [0:1], dim 1 [1:2]",
                                                            "dim 0 [1:2], dim 1 [0:1]", "dim 0 [1:2], dim 1 [1:2]"}));
  EXPECT_NE(first_line(*four.text).find("grids: dim 0 split 2, dim 1 split 2; rows: dim 2 split 2, columns: dim 3"),
            std::string::npos) << *four.text;
}

TEST(ShardingPictureRanks, UnevenSplitsAreSaidAndEmptySlicesLeftOut) {
  const Drawn d = draw({{"x", 4}}, "None,None,x", {2, 2, 5}, true);  // chunks of 2, 2, 1 and 0
  ASSERT_TRUE(d.text);
  EXPECT_EQ(first_line(*d.text), "[2, 2, 5]: dims 0 (2), 1 (2) whole; columns: dim 2 split 3 (uneven)");
  EXPECT_EQ(labelled_numbers(*d.text), (std::multiset<int64_t>{0, 1, 2}));
}

TEST(ShardingPictureRanks, TooManyBlocksOrGridsIsNoPicture) {
  EXPECT_FALSE(draw({{"x", 33}}, "None,x", {2, 33, 2}).text);
  EXPECT_TRUE(draw({{"x", 32}}, "None,x", {2, 32, 2}).text);
  EXPECT_FALSE(draw({{"x", 17}, {"y", 2}, {"z", 2}}, "x,y,z", {17, 2, 2}).text);
  const Drawn sixteen = draw({{"x", 16}, {"y", 2}, {"z", 2}}, "x,y,z", {16, 2, 2});
  ASSERT_TRUE(sixteen.text);
  EXPECT_EQ(headings(*sixteen.text).size(), 16u);
}

// A multi-process JAX job's ids (0-3 on process 0, 2048-2051 on process 1)
// label the blocks in place of reshard's dense ids.
TEST(ShardingPictureRanks, LabelsAreTheCallersNames) {
  const std::vector<std::string> jax_ids = {"0", "1", "2", "3", "2048", "2049", "2050", "2051"};
  for (const Shape& shape : {Shape{8}, Shape{2, 64}, Shape{8, 4, 2}}) {
    const Drawn d = draw({{"x", 2}, {"r", 4}}, "x", shape, false, {.labels = jax_ids});
    ASSERT_TRUE(d.text);
    EXPECT_NE(d.text->find("CPU 0,1,2,3"), std::string::npos) << *d.text;
    EXPECT_NE(d.text->find("CPU 2048,2049,2050,2051"), std::string::npos) << *d.text;
    EXPECT_EQ(labelled_numbers(*d.text), (std::multiset<int64_t>{0, 1, 2, 3, 2048, 2049, 2050, 2051}));
  }
  // Any printable names, and any platform word (or none).
  const Drawn tpu = draw({{"x", 2}}, "None,x", {2, 4, 2}, false, {.labels = {"a0", "b1"}, .platform = "TPU"});
  EXPECT_NE(tpu.text->find("TPU a0"), std::string::npos) << *tpu.text;
  const Drawn bare = draw({{"x", 2}}, "x", {4}, false, {.platform = ""});
  EXPECT_EQ(count_of(*bare.text, "CPU"), 0u);
  EXPECT_EQ(labelled_numbers(*bare.text), (std::multiset<int64_t>{0, 1}));
}

TEST(ShardingPictureRanks, BadArgumentsAreNamed) {
  const Drawn d = draw({{"x", 4}}, "x", {8});
  const auto with = [&](PictureStyle style) { return [&d, style] { draw_sharding({8}, d.boxes, d.devices, style); }; };
  EXPECT_TRUE(throws_error(with({.labels = {"0", "1", "2"}}), ErrorCode::kInvalidArgument, {"labels", "device 3"}));
  EXPECT_TRUE(throws_error(with({.labels = {"0", "", "2", "3"}}), ErrorCode::kInvalidArgument, {"labels[1]", "empty"}));
  EXPECT_TRUE(throws_error(with({.labels = {"0", "1", "a\nb", "3"}}), ErrorCode::kInvalidArgument,
                           {"labels[2]", "printable"}));
  EXPECT_TRUE(throws_error(with({.labels = {"0", "1", "2", std::string(65, '9')}}), ErrorCode::kInvalidArgument,
                           {"labels[3]", "64"}));
  EXPECT_TRUE(throws_error(with({.platform = "\x1b[31m"}), ErrorCode::kInvalidArgument, {"platform"}));
  EXPECT_TRUE(throws_error(with({.dtype = "bf\t16"}), ErrorCode::kInvalidArgument, {"dtype"}));
  EXPECT_TRUE(throws_error(with({.width = 0}), ErrorCode::kInvalidArgument, {"width", "0"}));
  EXPECT_TRUE(throws_error(with({.width = 1001}), ErrorCode::kInvalidArgument, {"width", "1001"}));
  EXPECT_TRUE(throws_error([&] { draw_sharding({8}, d.boxes, {0, 1}, {}); }, ErrorCode::kInvalidArgument,
                           {"boxes", "4 boxes for 2 devices"}));
  EXPECT_TRUE(throws_error([&] { draw_sharding({4}, d.boxes, d.devices, {}); }, ErrorCode::kInvalidArgument,
                           {"boxes[2]", "outside"}));
  EXPECT_TRUE(throws_error([&] { draw_sharding({8, 1}, d.boxes, d.devices, {}); }, ErrorCode::kInvalidArgument,
                           {"boxes[0]", "rank"}));
  const std::vector<Box> far = {Box({INT64_MAX - 1}, {1})};
  EXPECT_TRUE(throws_error([&] { draw_sharding({INT64_MAX - 1}, far, {0}, {}); }, ErrorCode::kInvalidArgument,
                           {"boxes[0]"}));
  EXPECT_TRUE(throws_error([&] { draw_sharding({-1}, {}, {}, {}); }, ErrorCode::kInvalidArgument, {"shape", "-1"}));
}

// A random spec for `rank` dimensions: each dimension unsplit, or split by one
// or two of the mesh's axes, no axis twice.
std::string random_spec(std::mt19937_64& rng, size_t rank) {
  std::vector<std::string> axes = {"x", "y", "z"};
  std::shuffle(axes.begin(), axes.end(), rng);
  std::vector<std::string> entries;
  for (size_t d = 0; d < rank; ++d) {
    const size_t take = std::min<size_t>(rng() % 3, axes.size());
    if (take == 0) entries.emplace_back("None");
    if (take == 1) entries.push_back(axes.back());
    if (take == 2) entries.push_back(fmt::format("({},{})", axes[axes.size() - 1], axes[axes.size() - 2]));
    axes.resize(axes.size() - take);
  }
  return fmt::format("{}", fmt::join(entries, ","));
}

// Random layouts of rank 0 and 3 to 5: the caption names every dimension, split
// ones with their number of slices; every holder of a non-empty slice is
// labelled once, one block per distinct slice; the grids line up; and there is
// no picture only when there would be more than 16 grids.
TEST(ShardingPictureRanks, RandomLayoutsNameEveryDimensionAndHolder) {
  std::mt19937_64 rng = seeded_rng();
  for (int trial = 0; trial < 200; ++trial) {
    static constexpr size_t kRanks[] = {0, 3, 3, 4, 5};
    const size_t rank = kRanks[rng() % 5];
    const std::vector<MeshAxis> mesh = {{"x", 1 + static_cast<int64_t>(rng() % 4)},
                                        {"y", 1 + static_cast<int64_t>(rng() % 3)},
                                        {"z", 1 + static_cast<int64_t>(rng() % 3)}};
    const std::string spec = random_spec(rng, rank);
    Shape shape;
    for (size_t d = 0; d < rank; ++d) shape.push_back(1 + static_cast<int64_t>(rng() % 12));
    const bool relabel = rng() % 2 == 0;
    PictureStyle style{.color = rng() % 2 == 0};
    if (relabel) {
      for (int64_t i = 0; i < 36; ++i) style.labels.push_back(fmt::format("{}", 1000 + i));
    }
    const Drawn d = draw(mesh, spec, shape, true, style);
    SCOPED_TRACE(fmt::format("mesh x={} y={} z={} spec '{}' shape ({}) labels {}", mesh[0].size, mesh[1].size,
                             mesh[2].size, spec, fmt::join(shape, ", "), relabel));
    std::vector<size_t> split;
    std::multiset<int64_t> holders;
    std::set<std::vector<std::pair<int64_t, int64_t>>> blocks, grids;
    std::vector<std::set<std::pair<int64_t, int64_t>>> slices(rank);
    for (size_t i = 0; i < d.boxes.size(); ++i) {
      if (d.boxes[i].empty()) continue;
      holders.insert(relabel ? 1000 + d.devices[i] : d.devices[i]);
      std::vector<std::pair<int64_t, int64_t>> box;
      for (size_t dim = 0; dim < rank; ++dim) {
        box.emplace_back(d.boxes[i].interval(dim).begin, d.boxes[i].interval(dim).end);
        slices[dim].insert(box[dim]);
      }
      blocks.insert(box);
    }
    for (size_t dim = 0; dim < rank; ++dim) {
      if (slices[dim].size() > 1) split.push_back(dim);
    }
    for (const auto& box : blocks) {
      std::vector<std::pair<int64_t, int64_t>> key;
      for (size_t i = 0; i + 2 < split.size(); ++i) key.push_back(box[split[i]]);
      grids.insert(key);
    }
    if (grids.size() > 16) {
      ASSERT_FALSE(d.text.has_value()) << *d.text;
      continue;
    }
    ASSERT_TRUE(d.text.has_value());
    const std::string caption = first_line(*d.text);
    ASSERT_EQ(caption.rfind(fmt::format("[{}]: ", fmt::join(shape, ", ")), 0), 0u) << caption;
    for (size_t dim = 0; dim < rank; ++dim) {
      const bool is_split = std::find(split.begin(), split.end(), dim) != split.end();
      const std::string named = is_split ? fmt::format("dim {} split {}", dim, slices[dim].size())
                                         : fmt::format("{} ({})", dim, shape[dim]);
      ASSERT_NE(caption.find(named), std::string::npos) << named << "\n" << *d.text;
    }
    ASSERT_EQ(labelled_numbers(*d.text), holders) << *d.text;
    ASSERT_EQ(count_of(*d.text, "CPU"), blocks.size()) << *d.text;
    ASSERT_EQ(grid_line_widths(*d.text).size(), 1u) << *d.text;
    ASSERT_EQ(headings(*d.text).size(), split.size() > 2 ? grids.size() : 0u) << *d.text;
  }
}

}  // namespace
}  // namespace reshard::testing
