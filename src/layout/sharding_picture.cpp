#include "reshard/layout/sharding_picture.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "picture_dims.h"
#include "picture_grid.h"
#include "reshard/layout/error.h"

namespace reshard {

using layout_detail::caption;
using layout_detail::choose_dims;
using layout_detail::draw_grids;
using layout_detail::DrawnDims;
using layout_detail::GridAxes;
using layout_detail::GridCells;
using layout_detail::panel_heading;
using layout_detail::slices_per_dim;

namespace {

// Beyond this many blocks a side, or grids, the picture says less than a table.
constexpr size_t kMaxBlocksPerSide = 32;
constexpr size_t kMaxPanels = 16;
constexpr int kMaxWidth = 1000;
constexpr size_t kMaxLabelSize = 64;

Error invalid(std::string message) { return Error(ErrorCode::kInvalidArgument, std::move(message)); }

// Labels are measured in bytes and printed inside borders: one byte, one column.
void check_text(std::string_view text, std::string_view what) {
  if (text.size() > kMaxLabelSize) throw invalid(fmt::format("{}: longer than {} characters", what, kMaxLabelSize));
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte > 0x7e) {
      throw invalid(fmt::format("{}: character {} (byte 0x{:02x}) is not printable ASCII", what, i, byte));
    }
  }
}

void check_boxes(const Shape& shape, const std::vector<Box>& boxes, const std::vector<DeviceId>& devices) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) throw invalid(fmt::format("shape: dimension {} is negative ({})", d, shape[d]));
  }
  if (boxes.size() != devices.size()) {
    throw invalid(fmt::format("boxes: {} boxes for {} devices", boxes.size(), devices.size()));
  }
  for (size_t i = 0; i < boxes.size(); ++i) {
    if (boxes[i].rank() != shape.size()) {
      throw invalid(fmt::format("boxes[{}]: rank {} for an array of rank {}", i, boxes[i].rank(), shape.size()));
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      const int64_t origin = boxes[i].origin()[d], size = boxes[i].shape()[d];
      // Written so that nothing overflows: origin + size <= extent.
      if (origin < 0 || size < 0 || size > shape[d] || origin > shape[d] - size) {
        throw invalid(fmt::format("boxes[{}]: {} lies outside the array [{}]", i, boxes[i].to_string(),
                                  fmt::join(shape, ", ")));
      }
    }
  }
}

void check_style(const PictureStyle& style, const std::vector<DeviceId>& devices) {
  if (style.width < 1 || style.width > kMaxWidth) {
    throw invalid(fmt::format("width: {} is not between 1 and {}", style.width, kMaxWidth));
  }
  check_text(style.platform, "platform");
  check_text(style.dtype, "dtype");
  for (size_t i = 0; i < style.labels.size(); ++i) {
    if (style.labels[i].empty()) throw invalid(fmt::format("labels[{}]: empty", i));
    check_text(style.labels[i], fmt::format("labels[{}]", i));
  }
  if (style.labels.empty()) return;
  for (DeviceId d : devices) {
    if (d < 0 || static_cast<size_t>(d) >= style.labels.size()) {
      throw invalid(fmt::format("labels: device {} has no label ({} labels, indexed by device id)", d,
                                style.labels.size()));
    }
  }
}

size_t position_of(const std::vector<Interval>& slices, Interval i) {
  return static_cast<size_t>(std::find(slices.begin(), slices.end(), i) - slices.begin());
}

GridAxes grid_axes(const Shape& shape, const std::vector<std::vector<Interval>>& slices, const DrawnDims& dims) {
  GridAxes axes;
  axes.two_d = dims.two_d;
  if (dims.rows) {
    axes.rows = slices[*dims.rows];
    axes.row_extent = shape[*dims.rows];
  }
  if (dims.cols) {
    axes.cols = slices[*dims.cols];
    axes.col_extent = shape[*dims.cols];
  }
  return axes;
}

// The panels' keys (their slices of dims.panels, in order) and the labels of
// every block of each panel, sorted by device id.
struct Panels {
  std::vector<std::vector<Interval>> keys;
  std::vector<GridCells> cells;
};

Panels fill_panels(const GridAxes& axes, const DrawnDims& dims, const std::vector<Box>& boxes,
                   const std::vector<DeviceId>& devices, const PictureStyle& style) {
  std::vector<size_t> order(boxes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return devices[a] < devices[b]; });
  std::map<std::vector<std::pair<int64_t, int64_t>>, GridCells> by_key;
  for (size_t i : order) {
    if (boxes[i].empty()) continue;
    std::vector<std::pair<int64_t, int64_t>> key;
    for (size_t d : dims.panels) key.emplace_back(boxes[i].interval(d).begin, boxes[i].interval(d).end);
    const size_t row = dims.rows ? position_of(axes.rows, boxes[i].interval(*dims.rows)) : 0;
    const size_t col = dims.cols ? position_of(axes.cols, boxes[i].interval(*dims.cols)) : 0;
    const DeviceId d = devices[i];
    by_key[key][{row, col}].push_back(style.labels.empty() ? fmt::format("{}", d)
                                                           : style.labels[static_cast<size_t>(d)]);
  }
  Panels panels;
  for (auto& [key, cells] : by_key) {
    std::vector<Interval> slices;
    for (const auto& [begin, end] : key) slices.push_back({begin, end});
    panels.keys.push_back(std::move(slices));
    panels.cells.push_back(std::move(cells));
  }
  return panels;
}

}  // namespace

std::optional<std::string> draw_sharding(const Shape& shape, const std::vector<Box>& boxes,
                                         const std::vector<DeviceId>& devices, const PictureStyle& style) {
  check_boxes(shape, boxes, devices);
  check_style(style, devices);
  if (Box::whole(shape).empty()) return std::nullopt;
  if (std::all_of(boxes.begin(), boxes.end(), [](const Box& b) { return b.empty(); })) return std::nullopt;
  const std::vector<std::vector<Interval>> slices = slices_per_dim(shape, boxes);
  const DrawnDims dims = choose_dims(shape, slices);
  const GridAxes axes = grid_axes(shape, slices, dims);
  if (axes.rows.size() > kMaxBlocksPerSide || axes.cols.size() > kMaxBlocksPerSide) return std::nullopt;
  const Panels panels = fill_panels(axes, dims, boxes, devices, style);
  if (panels.cells.size() > kMaxPanels) return std::nullopt;
  const std::vector<std::string> grids = draw_grids(axes, panels.cells, style);
  // Ranks 1 and 2 are JAX's picture, which needs no caption.
  if (shape.size() == 1 || shape.size() == 2) return grids.front();
  std::string out = caption(shape, slices, dims, style.dtype) + "\n";
  for (size_t p = 0; p < grids.size(); ++p) {
    if (!dims.panels.empty()) out += panel_heading(dims.panels, panels.keys[p]) + "\n";
    out += grids[p];
  }
  return out;
}

}  // namespace reshard
