#include "picture_dims.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace reshard::layout_detail {
namespace {

// Whether the picture must show dimension d: it is cut into several slices (or
// the only slice held is not the whole dimension).
bool is_split(const std::vector<Interval>& slices, int64_t extent) {
  return !(slices.size() == 1 && slices.front() == Interval{0, extent});
}

std::string split_text(size_t dim, const std::vector<Interval>& slices) {
  const bool uneven = std::any_of(slices.begin(), slices.end(),
                                  [&](Interval i) { return i.size() != slices.front().size(); });
  return fmt::format("dim {} split {}{}", dim, slices.size(), uneven ? " (uneven)" : "");
}

// "dim 0 (32) whole" or "dims 0 (32), 3 (128) whole"; empty when every dimension is drawn.
std::string whole_text(const Shape& shape, const DrawnDims& dims) {
  std::vector<std::string> whole;
  for (size_t d = 0; d < shape.size(); ++d) {
    const bool drawn = std::find(dims.panels.begin(), dims.panels.end(), d) != dims.panels.end() ||
                       dims.rows == d || dims.cols == d;
    if (!drawn) whole.push_back(fmt::format("{} ({})", d, shape[d]));
  }
  if (whole.empty()) return {};
  return fmt::format("dim{} {} whole", whole.size() == 1 ? "" : "s", fmt::join(whole, ", "));
}

}  // namespace

std::vector<std::vector<Interval>> slices_per_dim(const Shape& shape, const std::vector<Box>& boxes) {
  std::vector<std::vector<Interval>> out(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    for (const Box& box : boxes) {
      const Interval i = box.interval(d);
      if (!box.empty() && std::find(out[d].begin(), out[d].end(), i) == out[d].end()) out[d].push_back(i);
    }
    std::sort(out[d].begin(), out[d].end(),
              [](Interval a, Interval b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  }
  return out;
}

DrawnDims choose_dims(const Shape& shape, const std::vector<std::vector<Interval>>& slices) {
  if (shape.size() == 1) return {.cols = 0};
  if (shape.size() == 2) return {.rows = 0, .cols = 1, .two_d = true};
  std::vector<size_t> split;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (is_split(slices[d], shape[d])) split.push_back(d);
  }
  DrawnDims dims;
  if (split.size() == 1) dims.cols = split[0];
  if (split.size() >= 2) {
    dims.rows = split[split.size() - 2];
    dims.cols = split.back();
    dims.two_d = true;
    dims.panels.assign(split.begin(), split.end() - 2);
  }
  return dims;
}

std::string caption(const Shape& shape, const std::vector<std::vector<Interval>>& slices, const DrawnDims& dims,
                    const std::string& dtype) {
  std::vector<std::string> parts;
  if (shape.empty()) parts.emplace_back("a scalar");
  if (std::string whole = whole_text(shape, dims); !whole.empty()) parts.push_back(std::move(whole));
  if (!dims.panels.empty()) {
    std::vector<std::string> panels;
    for (size_t d : dims.panels) panels.push_back(split_text(d, slices[d]));
    parts.push_back(fmt::format("grids: {}", fmt::join(panels, ", ")));
  }
  if (dims.rows && dims.cols) {
    parts.push_back(fmt::format("rows: {}, columns: {}", split_text(*dims.rows, slices[*dims.rows]),
                                split_text(*dims.cols, slices[*dims.cols])));
  } else if (dims.cols) {
    parts.push_back(fmt::format("columns: {}", split_text(*dims.cols, slices[*dims.cols])));
  }
  return fmt::format("[{}]{}{}: {}", fmt::join(shape, ", "), dtype.empty() ? "" : " ", dtype, fmt::join(parts, "; "));
}

std::string panel_heading(const std::vector<size_t>& dims, const std::vector<Interval>& slices) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < dims.size(); ++i) {
    parts.push_back(fmt::format("dim {} [{}:{}]", dims[i], slices[i].begin, slices[i].end));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace reshard::layout_detail
