// NamedSharding.picture: draw_sharding from Python, with every argument
// checked here so that a wrong type is a typed error naming the argument.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bindings.h"
#include "reshard/layout/error.h"
#include "reshard/layout/sharding_picture.h"

namespace reshard::python {
namespace {

Error invalid(std::string message) { return Error(ErrorCode::kInvalidArgument, std::move(message)); }

std::string python_type_name(nb::handle value) { return nb::type_name(value.type()).c_str(); }

// An int (numpy's too), but not a bool.
bool is_int(nb::handle value) { return PyIndex_Check(value.ptr()) && !PyBool_Check(value.ptr()); }

Shape shape_argument(nb::handle value) {
  if (PyUnicode_Check(value.ptr()) || (!is_int(value) && !PySequence_Check(value.ptr()))) {
    throw invalid(fmt::format("global_shape: expected a sequence of ints, got {}", python_type_name(value)));
  }
  try {
    return shape_from_python(value);
  } catch (const nb::python_error&) {
    throw invalid("global_shape: expected a sequence of ints (each at most 2**63 - 1)");
  } catch (const nb::cast_error&) {
    throw invalid("global_shape: expected a sequence of ints (each at most 2**63 - 1)");
  }
}

// One label per reshard device id: an int (a JAX device id) or a str.
std::vector<std::string> labels_argument(nb::handle value) {
  if (value.is_none()) return {};
  if (PyUnicode_Check(value.ptr()) || !PySequence_Check(value.ptr())) {
    throw invalid(fmt::format("labels: expected a sequence of ints or strs indexed by device id, got {}",
                              python_type_name(value)));
  }
  std::vector<std::string> out;
  for (nb::handle item : nb::iter(value)) {
    if (PyUnicode_Check(item.ptr())) {
      out.push_back(nb::cast<std::string>(item));
    } else if (is_int(item)) {
      out.push_back(nb::str(nb::int_(item)).c_str());
    } else {
      throw invalid(fmt::format("labels[{}]: expected an int or a str, got {}", out.size(), python_type_name(item)));
    }
  }
  return out;
}

std::string text_argument(nb::handle value, const char* name) {
  if (!PyUnicode_Check(value.ptr())) throw invalid(fmt::format("{}: expected a str, got {}", name, python_type_name(value)));
  return nb::cast<std::string>(value);
}

PictureStyle style_arguments(nb::handle labels, nb::handle dtype, nb::handle platform, nb::handle color,
                             nb::handle width) {
  PictureStyle style;
  style.labels = labels_argument(labels);
  if (!dtype.is_none()) style.dtype = text_argument(dtype, "dtype");
  style.platform = text_argument(platform, "platform");
  if (!PyBool_Check(color.ptr())) throw invalid(fmt::format("color: expected a bool, got {}", python_type_name(color)));
  style.color = color.ptr() == Py_True;
  if (!is_int(width)) throw invalid(fmt::format("width: expected an int, got {}", python_type_name(width)));
  const nb::int_ columns(width);
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(columns.ptr(), &overflow);
  if (overflow != 0 || value < 1 || value > 1000) {
    throw invalid(fmt::format("width: {} is not between 1 and 1000", nb::str(columns).c_str()));
  }
  style.width = static_cast<int>(value);
  return style;
}

}  // namespace

nb::object sharding_picture(const NamedSharding& sharding, nb::handle global_shape, nb::handle labels,
                            nb::handle dtype, nb::handle platform, nb::handle color, nb::handle width) {
  const Shape shape = shape_argument(global_shape);
  const PictureStyle style = style_arguments(labels, dtype, platform, color, width);
  try {
    sharding.validate(shape);
  } catch (const Error& e) {
    throw e.with_context("global_shape");
  }
  const std::optional<std::string> picture =
      draw_sharding(shape, sharding.index_domains(shape), sharding.mesh().devices(), style);
  if (!picture) return nb::none();
  return nb::str(picture->c_str());
}

}  // namespace reshard::python
