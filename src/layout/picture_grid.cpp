#include "picture_grid.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace reshard::layout_detail {
namespace {

// As JAX: a 2-D array is drawn 10 lines tall, and a character cell counts as
// 2.5 times taller than wide; blocks are at least 9 columns wide.
constexpr int kBaseHeight = 10;
constexpr double kCellAspect = 2.5;
constexpr int kMinBlockWidth = 9;

// Block backgrounds from the xterm 256-colour cube; neighbours differ.
constexpr int kPalette[] = {75, 215, 114, 176, 222, 68, 209, 151, 141, 179, 80, 174, 110, 186, 103, 150};

// "CPU 0,4,8,12" split at commas into lines of at most `width` characters.
std::vector<std::string> label_lines(const std::vector<std::string>& labels, const std::string& platform,
                                     size_t width) {
  std::vector<std::string> lines(1);
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string word = fmt::format("{}{}{}", i == 0 && !platform.empty() ? platform + " " : "", labels[i],
                                         i + 1 < labels.size() ? "," : "");
    if (!lines.back().empty() && lines.back().size() + word.size() > width) lines.emplace_back();
    lines.back() += word;
  }
  return lines;
}

size_t longest_word(const std::vector<std::string>& labels, const std::string& platform) {
  size_t longest = 0;
  for (const std::string& line : label_lines(labels, platform, 0)) longest = std::max(longest, line.size());
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

// Block sizes in columns and lines, borders excluded, shared by every panel.
struct BlockSizes {
  std::vector<int> widths, heights;
};

// A 2-D picture keeps the array's aspect: 10 lines tall, unless that would make
// it wider than `width`. Every block is at least wide enough for its longest
// label word plus a margin, and tall enough for its wrapped label.
BlockSizes block_sizes(const GridAxes& axes, const std::vector<GridCells>& panels, const PictureStyle& style) {
  const int max_inner_width = style.width - static_cast<int>(axes.cols.size()) - 1;
  int inner_width = max_inner_width;
  int height = 0;
  if (axes.two_d) {
    const double aspect = static_cast<double>(axes.col_extent) / static_cast<double>(axes.row_extent);
    const double width_for_base = kBaseHeight * kCellAspect * aspect;
    if (width_for_base <= max_inner_width) {
      inner_width = static_cast<int>(std::lround(width_for_base));
      height = kBaseHeight;
    } else {
      height = static_cast<int>(std::lround(max_inner_width / kCellAspect / aspect));
    }
  }
  BlockSizes sizes{proportional(axes.cols, axes.col_extent, inner_width, kMinBlockWidth),
                   proportional(axes.rows, axes.row_extent, height, 1)};
  for (const GridCells& cells : panels) {
    for (const auto& [where, labels] : cells) {
      int& w = sizes.widths[where.second];
      w = std::max(w, static_cast<int>(longest_word(labels, style.platform)) + 2);
    }
  }
  for (const GridCells& cells : panels) {
    for (const auto& [where, labels] : cells) {
      const auto width = static_cast<size_t>(sizes.widths[where.second] - 2);
      int& h = sizes.heights[where.first];
      h = std::max(h, static_cast<int>(label_lines(labels, style.platform, width).size()));
    }
  }
  return sizes;
}

// One line of one block: its label line centred (blank above and below the label).
std::string cell_line(const std::vector<std::string>& lines, int height, int width, int line) {
  const int top = (height - static_cast<int>(lines.size())) / 2;
  const int index = line - top;
  const std::string text =
      index >= 0 && index < static_cast<int>(lines.size()) ? lines[static_cast<size_t>(index)] : std::string();
  const int left = (width - static_cast<int>(text.size())) / 2;
  return repeat(" ", left) + text + repeat(" ", width - left - static_cast<int>(text.size()));
}

std::string draw_panel(const GridAxes& axes, const GridCells& cells, const BlockSizes& sizes,
                       const PictureStyle& style, size_t panel) {
  const std::vector<int>& widths = sizes.widths;
  std::string out = border(widths, "┌", "┬", "┐");
  for (size_t r = 0; r < axes.rows.size(); ++r) {
    if (r > 0) out += border(widths, "├", "┼", "┤");
    std::vector<std::vector<std::string>> lines(axes.cols.size());
    for (size_t c = 0; c < axes.cols.size(); ++c) {
      const auto found = cells.find({r, c});
      if (found == cells.end()) continue;
      lines[c] = label_lines(found->second, style.platform, static_cast<size_t>(widths[c] - 2));
    }
    for (int line = 0; line < sizes.heights[r]; ++line) {
      out += "│";
      for (size_t c = 0; c < axes.cols.size(); ++c) {
        if (c > 0) out += "│";
        const std::string cell = cell_line(lines[c], sizes.heights[r], widths[c], line);
        if (style.color) {
          const size_t block = (panel * axes.rows.size() + r) * axes.cols.size() + c;
          const int background = kPalette[block % std::size(kPalette)];
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

}  // namespace

std::vector<std::string> draw_grids(const GridAxes& axes, const std::vector<GridCells>& panels,
                                    const PictureStyle& style) {
  const BlockSizes sizes = block_sizes(axes, panels, style);
  std::vector<std::string> out;
  for (size_t p = 0; p < panels.size(); ++p) out.push_back(draw_panel(axes, panels[p], sizes, style, p));
  return out;
}

}  // namespace reshard::layout_detail
