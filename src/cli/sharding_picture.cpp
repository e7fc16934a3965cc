#include "cli/sharding_picture.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace reshard::cli {
namespace {

// Beyond this many blocks a side the picture says less than the table.
constexpr size_t kMaxBlocksPerSide = 32;
// As JAX: a 2-D array is drawn 10 lines tall, and a character cell counts as
// 2.5 times taller than wide; blocks are at least 9 columns wide.
constexpr int kBaseHeight = 10;
constexpr double kCellAspect = 2.5;
constexpr int kMinBlockWidth = 9;

// Block backgrounds from the xterm 256-colour cube; neighbours differ.
constexpr int kPalette[] = {75, 215, 114, 176, 222, 68, 209, 151, 141, 179, 80, 174, 110, 186, 103, 150};

// The blocks along one axis of the picture: distinct non-empty intervals in order.
std::vector<Interval> distinct_intervals(const std::vector<Box>& boxes, size_t dim) {
  std::vector<Interval> out;
  for (const Box& box : boxes) {
    const Interval i = box.interval(dim);
    if (i.size() > 0 && std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  }
  std::sort(out.begin(), out.end(), [](Interval a, Interval b) { return a.begin < b.begin; });
  return out;
}

size_t position_of(const std::vector<Interval>& intervals, Interval i) {
  return static_cast<size_t>(std::find(intervals.begin(), intervals.end(), i) - intervals.begin());
}

// "CPU 0,4,8,12" split at commas into lines of at most `width` characters.
std::vector<std::string> label_lines(const std::vector<DeviceId>& ids, size_t width) {
  std::vector<std::string> words;
  for (size_t i = 0; i < ids.size(); ++i) {
    words.push_back(fmt::format("{}{}{}", i == 0 ? "CPU " : "", ids[i], i + 1 < ids.size() ? "," : ""));
  }
  std::vector<std::string> lines(1);
  for (const std::string& word : words) {
    if (!lines.back().empty() && lines.back().size() + word.size() > width) lines.emplace_back();
    lines.back() += word;
  }
  return lines;
}

size_t longest_word(const std::vector<DeviceId>& ids) {
  size_t longest = 0;
  for (const std::string& line : label_lines(ids, 0)) longest = std::max(longest, line.size());
  return longest;
}

// Shares `total` columns (or lines) among intervals in proportion to their sizes.
std::vector<int> proportional(const std::vector<Interval>& intervals, int64_t extent, int total, int minimum) {
  std::vector<int> out;
  for (const Interval& i : intervals) {
    const double share = static_cast<double>(total) * static_cast<double>(i.size()) / static_cast<double>(extent);
    out.push_back(std::max(minimum, static_cast<int>(std::lround(share))));
  }
  return out;
}

std::string repeat(std::string_view piece, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

std::string border(const std::vector<int>& widths, std::string_view left, std::string_view middle,
                   std::string_view right) {
  std::string out(left);
  for (size_t c = 0; c < widths.size(); ++c) {
    if (c > 0) out += middle;
    out += repeat("─", widths[c]);
  }
  return out + std::string(right) + "\n";
}

// Readable text on a cube colour: black on light backgrounds, white on dark.
int text_color_for(int background) {
  static constexpr int kLevels[] = {0, 95, 135, 175, 215, 255};
  const int i = background - 16;
  const double luminance = 0.299 * kLevels[i / 36] + 0.587 * kLevels[(i / 6) % 6] + 0.114 * kLevels[i % 6];
  return luminance > 140 ? 16 : 231;
}

struct Grid {
  std::vector<Interval> rows, cols;
  std::map<std::pair<size_t, size_t>, std::vector<DeviceId>> cells;  // (row, col) -> holders
};

Grid make_grid(const Shape& shape, const std::vector<Box>& boxes, const std::vector<DeviceId>& devices) {
  Grid grid;
  const bool two_d = shape.size() == 2;
  grid.rows = two_d ? distinct_intervals(boxes, 0) : std::vector<Interval>{{0, 1}};
  grid.cols = distinct_intervals(boxes, two_d ? 1 : 0);
  for (size_t i = 0; i < boxes.size(); ++i) {
    if (boxes[i].empty()) continue;
    const size_t row = two_d ? position_of(grid.rows, boxes[i].interval(0)) : 0;
    const size_t col = position_of(grid.cols, boxes[i].interval(two_d ? 1 : 0));
    grid.cells[{row, col}].push_back(devices[i]);
  }
  for (auto& [where, ids] : grid.cells) std::sort(ids.begin(), ids.end());
  return grid;
}

}  // namespace

std::optional<std::string> draw_sharding(const Shape& shape, const std::vector<Box>& boxes,
                                         const std::vector<DeviceId>& devices, const PictureStyle& style) {
  if (shape.size() != 1 && shape.size() != 2) return std::nullopt;
  if (Box::whole(shape).empty()) return std::nullopt;
  const Grid grid = make_grid(shape, boxes, devices);
  if (grid.rows.size() > kMaxBlocksPerSide || grid.cols.size() > kMaxBlocksPerSide) return std::nullopt;
  const bool two_d = shape.size() == 2;
  const int64_t row_extent = two_d ? shape[0] : 1;
  const int64_t col_extent = two_d ? shape[1] : shape[0];

  // Columns and lines for the blocks (borders excluded). A 2-D picture keeps the
  // array's aspect: 10 lines tall, unless that would make it wider than `width`.
  const int max_inner_width = style.width - static_cast<int>(grid.cols.size()) - 1;
  int inner_width = max_inner_width;
  int height = 0;
  if (two_d) {
    const double aspect = static_cast<double>(col_extent) / static_cast<double>(row_extent);
    const double width_for_base = kBaseHeight * kCellAspect * aspect;
    if (width_for_base <= max_inner_width) {
      inner_width = static_cast<int>(std::lround(width_for_base));
      height = kBaseHeight;
    } else {
      height = static_cast<int>(std::lround(max_inner_width / kCellAspect / aspect));
    }
  }

  // Every block at least wide enough for its longest label word, plus a margin.
  std::vector<int> widths = proportional(grid.cols, col_extent, inner_width, kMinBlockWidth);
  for (const auto& [where, ids] : grid.cells) {
    widths[where.second] = std::max(widths[where.second], static_cast<int>(longest_word(ids)) + 2);
  }
  std::map<std::pair<size_t, size_t>, std::vector<std::string>> labels;
  for (const auto& [where, ids] : grid.cells) {
    labels[where] = label_lines(ids, static_cast<size_t>(widths[where.second] - 2));
  }
  std::vector<int> heights = proportional(grid.rows, row_extent, height, 1);
  for (const auto& [where, lines] : labels) {
    heights[where.first] = std::max(heights[where.first], static_cast<int>(lines.size()));
  }

  std::string out = border(widths, "┌", "┬", "┐");
  for (size_t r = 0; r < grid.rows.size(); ++r) {
    if (r > 0) out += border(widths, "├", "┼", "┤");
    for (int line = 0; line < heights[r]; ++line) {
      out += "│";
      for (size_t c = 0; c < grid.cols.size(); ++c) {
        if (c > 0) out += "│";
        const auto found = labels.find({r, c});
        const std::vector<std::string> lines = found == labels.end() ? std::vector<std::string>{} : found->second;
        const int top = (heights[r] - static_cast<int>(lines.size())) / 2;
        const int index = line - top;
        const std::string text = index >= 0 && index < static_cast<int>(lines.size())
                                     ? lines[static_cast<size_t>(index)] : std::string();
        const int left = (widths[c] - static_cast<int>(text.size())) / 2;
        const std::string cell = repeat(" ", left) + text + repeat(" ", widths[c] - left - static_cast<int>(text.size()));
        if (style.color) {
          const int background = kPalette[(r * grid.cols.size() + c) % std::size(kPalette)];
          out += fmt::format("\x1b[48;5;{}m\x1b[38;5;{}m{}\x1b[0m", background, text_color_for(background), cell);
        } else {
          out += cell;
        }
      }
      out += "│\n";
    }
  }
  return out + border(widths, "└", "┴", "┘");
}

}  // namespace reshard::cli
