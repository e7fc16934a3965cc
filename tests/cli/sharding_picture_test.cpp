#include "cli/sharding_picture.h"

#include <random>
#include <cctype>
#include <string>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "reshard/layout/sharding.h"
#include "support/seed.h"

namespace reshard::cli {
namespace {

struct Drawn {
  std::optional<std::string> text;
  std::vector<Box> boxes;
  std::vector<DeviceId> devices;
};

Drawn draw(std::vector<MeshAxis> axes, std::string_view spec, const Shape& shape, bool uneven = false,
           PictureStyle style = {}) {
  const NamedSharding s(Mesh::with_default_order(std::move(axes)), PartitionSpec::parse(spec), MemoryKind::kDevice,
                        uneven);
  Drawn d;
  d.boxes = s.index_domains(shape);
  d.devices = s.mesh().devices();
  d.text = draw_sharding(shape, d.boxes, d.devices, style);
  return d;
}

// The text without its ANSI colour codes ("\x1b[...m").
std::string without_colour(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "\x1b[") == 0) {
      i = text.find('m', i);
      if (i == std::string::npos) break;
    } else {
      out += text[i];
    }
  }
  return out;
}

// Every run of decimal digits in `text`, as numbers.
std::vector<int64_t> numbers_in(const std::string& text) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    out.push_back(std::stoll(text.substr(i, end - i)));
    i = end;
  }
  return out;
}

// The picture's lines with colour codes removed, each as a count of columns
// (box-drawing characters are three bytes but one column).
std::vector<size_t> line_widths(const std::string& text) {
  const std::string plain = without_colour(text);
  std::vector<size_t> widths(1, 0);
  for (size_t i = 0; i < plain.size(); ++i) {
    if (plain[i] == '\n') {
      widths.push_back(0);
    } else if ((static_cast<unsigned char>(plain[i]) & 0xc0) != 0x80) {
      ++widths.back();  // count the lead byte of each UTF-8 character only
    }
  }
  widths.pop_back();  // after the final newline
  return widths;
}

// Every device id written in the picture's labels.
std::multiset<DeviceId> labelled_devices(const std::string& text) {
  const std::vector<int64_t> ids = numbers_in(without_colour(text));
  return {ids.begin(), ids.end()};
}

TEST(ShardingPicture, OnlyRanksOneAndTwoNonEmpty) {
  EXPECT_FALSE(draw({{"x", 2}}, "", {}).text.has_value());
  EXPECT_FALSE(draw({{"x", 2}}, "x", {2, 2, 2}).text.has_value());
  EXPECT_FALSE(draw({{"x", 2}}, "x", {0}).text.has_value());
  EXPECT_FALSE(draw({{"x", 2}}, "x", {4, 0}).text.has_value());
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
  std::multiset<DeviceId> want(d.devices.begin(), d.devices.end());
  EXPECT_EQ(labelled_devices(*d.text), want) << *d.text;
}

// Random 1-D and 2-D layouts: a rectangular picture that names every device
// holding a non-empty slice exactly once, with one block per distinct slice.
TEST(ShardingPicture, RandomLayoutsDrawEveryHolderOnce) {
  std::mt19937_64 rng = testing::seeded_rng();
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
    std::multiset<DeviceId> holders;
    std::set<std::pair<std::vector<int64_t>, Shape>> distinct;
    for (size_t i = 0; i < d.boxes.size(); ++i) {
      if (d.boxes[i].empty()) continue;
      holders.insert(d.devices[i]);
      distinct.insert({d.boxes[i].origin(), d.boxes[i].shape()});
    }
    ASSERT_EQ(labelled_devices(*d.text), holders) << *d.text;
    size_t blocks = 0;
    for (size_t at = d.text->find("CPU"); at != std::string::npos; at = d.text->find("CPU", at + 1)) ++blocks;
    ASSERT_EQ(blocks, distinct.size()) << *d.text;
  }
}

}  // namespace
}  // namespace reshard::cli
