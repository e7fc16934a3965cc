#include "reshard/layout/box.h"

#include <algorithm>

#include <fmt/format.h>

#include "layout/box_copy.h"
#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard {

using layout_detail::BoxCopy;
using layout_detail::checked_add;
using layout_detail::checked_mul;
using layout_detail::checked_product;
using layout_detail::checked_sub;

Interval intersect(Interval a, Interval b) {
  const int64_t begin = std::max(a.begin, b.begin);
  const int64_t end = std::min(a.end, b.end);
  return end > begin ? Interval{begin, end} : Interval{begin, begin};
}

Box::Box(std::vector<int64_t> origin, Shape shape) : origin_(std::move(origin)), shape_(std::move(shape)) {
  if (origin_.size() != shape_.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("box origin has rank {} but shape has rank {}", origin_.size(), shape_.size()));
  }
  for (size_t d = 0; d < shape_.size(); ++d) {
    if (shape_[d] < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("box dimension {} has negative size {}", d, shape_[d]));
    }
    checked_add(origin_[d], shape_[d], "box end");
  }
}

Box Box::whole(const Shape& shape) { return Box(std::vector<int64_t>(shape.size(), 0), shape); }

Box Box::from_intervals(std::span<const Interval> intervals) {
  std::vector<int64_t> origin;
  Shape shape;
  for (const Interval& i : intervals) {
    origin.push_back(i.begin);
    shape.push_back(i.size());
  }
  return Box(std::move(origin), std::move(shape));
}

int64_t Box::volume() const { return checked_product(shape_, "box volume"); }

bool Box::empty() const {
  return std::any_of(shape_.begin(), shape_.end(), [](int64_t s) { return s == 0; });
}

bool Box::contains(const Box& inner) const {
  if (inner.rank() != rank()) return false;
  if (inner.empty()) return true;
  for (size_t d = 0; d < rank(); ++d) {
    if (inner.origin_[d] < origin_[d] ||
        inner.origin_[d] + inner.shape_[d] > origin_[d] + shape_[d]) {
      return false;
    }
  }
  return true;
}

Box Box::intersect(const Box& other) const {
  if (other.rank() != rank()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("cannot intersect boxes of rank {} and {}", rank(), other.rank()));
  }
  std::vector<Interval> parts(rank());
  for (size_t d = 0; d < rank(); ++d) parts[d] = reshard::intersect(interval(d), other.interval(d));
  return from_intervals(parts);
}

Box Box::relative_to(const Box& base) const {
  if (base.rank() != rank()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("cannot express a rank-{} box relative to a rank-{} box", rank(), base.rank()));
  }
  std::vector<int64_t> origin(rank());
  for (size_t d = 0; d < rank(); ++d) origin[d] = checked_sub(origin_[d], base.origin_[d], "relative box origin");
  return Box(std::move(origin), shape_);
}

std::string Box::to_string() const {
  std::string out = "[";
  for (size_t d = 0; d < rank(); ++d) {
    if (d > 0) out += ", ";
    out += fmt::format("{}:{}", origin_[d], origin_[d] + shape_[d]);
  }
  return out + "]";
}

std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride = checked_mul(stride, shape[d], "row-major stride");
  }
  return strides;
}

void for_each_run(const Box& array, const Box& sub, const std::function<void(Run)>& visit) {
  if (!array.contains(sub)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("box {} is not inside {}", sub.to_string(), array.to_string()));
  }
  // A box copy of one-byte elements counts in elements. Its rows are the
  // maximal runs in the array: the other side, `sub` held densely, is
  // contiguous wherever the array is, so it never splits a row.
  BoxCopy(sub, array, sub, 1).for_each_run([&](int64_t offset, int64_t, uint64_t, uint64_t length) {
    visit(Run{offset, static_cast<int64_t>(length)});
  });
}

std::vector<Run> contiguous_runs(const Box& array, const Box& sub) {
  std::vector<Run> runs;
  for_each_run(array, sub, [&](Run r) { runs.push_back(r); });
  return runs;
}

}  // namespace reshard
