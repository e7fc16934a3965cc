// Box: a hyper-rectangle of array indices, rank chosen at run time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace reshard {

using Shape = std::vector<int64_t>;

// Half-open interval [begin, end) along one dimension.
struct Interval {
  int64_t begin = 0;
  int64_t end = 0;

  int64_t size() const { return end - begin; }
  bool operator==(const Interval&) const = default;
};

// Intersection of two intervals; an empty interval (begin == end) if disjoint.
Interval intersect(Interval a, Interval b);

// An owning box: origin and shape per dimension (as TensorStore's Box).
class Box {
 public:
  Box() = default;
  // Throws Error(kInvalidArgument) if ranks differ or a shape entry is negative.
  Box(std::vector<int64_t> origin, Shape shape);

  // The box [0, shape) of a whole array.
  static Box whole(const Shape& shape);
  static Box from_intervals(std::span<const Interval> intervals);

  size_t rank() const { return shape_.size(); }
  const std::vector<int64_t>& origin() const { return origin_; }
  const Shape& shape() const { return shape_; }
  Interval interval(size_t dim) const { return {origin_[dim], origin_[dim] + shape_[dim]}; }

  // Number of elements, overflow-checked (1 for rank 0).
  int64_t volume() const;
  bool empty() const;

  // Whether every index of `inner` lies in this box (an empty box is always contained).
  bool contains(const Box& inner) const;

  // The common part of two boxes of equal rank (possibly empty).
  Box intersect(const Box& other) const;

  // The same box with the origin moved by -base.origin() (coordinates inside `base`).
  Box relative_to(const Box& base) const;

  // "[0:2, 4:8]".
  std::string to_string() const;

  bool operator==(const Box&) const = default;

 private:
  std::vector<int64_t> origin_;
  Shape shape_;
};

// Row-major (C order) element strides for `shape`, overflow-checked.
std::vector<int64_t> row_major_strides(const Shape& shape);

// A run of consecutive elements inside a row-major array.
struct Run {
  int64_t offset = 0;  // elements from the array's first element
  int64_t length = 0;  // elements
  bool operator==(const Run&) const = default;
};

// Calls `visit` with each maximal contiguous run that `sub` covers inside a
// row-major array whose extent is `array` (both in the same coordinates; `sub`
// must be contained in `array`). Trailing dimensions that `sub` covers fully are
// merged, so a whole-rows box yields one run. Runs come in increasing offset.
void for_each_run(const Box& array, const Box& sub, const std::function<void(Run)>& visit);

// The same runs as a list.
std::vector<Run> contiguous_runs(const Box& array, const Box& sub);

}  // namespace reshard
