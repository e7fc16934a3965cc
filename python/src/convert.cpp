// Conversions between Python values and layout types shared by the bindings.
#include <Python.h>

#include "bindings.h"

namespace reshard::python {

Shape shape_from_python(nb::handle sequence) {
  if (PyLong_Check(sequence.ptr())) return Shape{nb::cast<int64_t>(sequence)};
  Shape shape;
  for (nb::handle dim : nb::iter(sequence)) {
    // Anything int-like (numpy integers too), but not floats: TypeError otherwise.
    PyObject* index = PyNumber_Index(dim.ptr());
    if (index == nullptr) throw nb::python_error();
    shape.push_back(nb::cast<int64_t>(nb::steal(index)));
  }
  return shape;
}

nb::tuple shape_to_python(const Shape& shape) {
  nb::list dims;
  for (int64_t d : shape) dims.append(nb::int_(d));
  return nb::tuple(dims);
}

nb::tuple dims_to_python(std::span<const uint64_t> dims) {
  nb::list out;
  for (uint64_t d : dims) out.append(nb::int_(d));
  return nb::tuple(out);
}

namespace {

nb::object make_slice(nb::handle start, nb::handle stop) {
  return nb::steal(PySlice_New(start.ptr(), stop.ptr(), nullptr));
}

}  // namespace

nb::tuple box_to_index(const Box& box, const std::vector<int64_t>& num_chunks) {
  nb::list index;
  for (size_t d = 0; d < box.rank(); ++d) {
    if (num_chunks[d] == 1) {
      index.append(make_slice(nb::none(), nb::none()));
    } else {
      const Interval part = box.interval(d);
      index.append(make_slice(nb::int_(part.begin), nb::int_(part.end)));
    }
  }
  return nb::tuple(index);
}

nb::tuple box_to_slices(const Box& box) {
  nb::list index;
  for (size_t d = 0; d < box.rank(); ++d) {
    const Interval part = box.interval(d);
    index.append(make_slice(nb::int_(part.begin), nb::int_(part.end)));
  }
  return nb::tuple(index);
}

}  // namespace reshard::python
