// PartitionSpec(*entries), as jax.sharding.PartitionSpec takes them.
#include <functional>
#include <string>

#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/error.h"

namespace reshard::python {
namespace {

std::string axis_name(nb::handle item, const std::string& where) {
  if (!nb::isinstance<nb::str>(item)) {
    throw Error(ErrorCode::kUnknownAxis,
                fmt::format("invalid partition spec entry {}: mesh axis names are strings, got {}", where,
                            nb::cast<std::string>(nb::repr(item))));
  }
  return nb::cast<std::string>(item);
}

SpecEntry spec_entry(nb::handle entry) {
  if (entry.is_none()) return {};
  if (nb::isinstance<nb::str>(entry)) return {nb::cast<std::string>(entry)};
  if (!nb::isinstance<nb::tuple>(entry) && !nb::isinstance<nb::list>(entry)) {
    return {axis_name(entry, nb::cast<std::string>(nb::repr(entry)))};
  }
  const std::string where = nb::cast<std::string>(nb::repr(entry));
  SpecEntry axes;
  for (nb::handle item : nb::iter(entry)) {
    if (nb::isinstance<nb::tuple>(item) || nb::isinstance<nb::list>(item)) {
      throw Error(ErrorCode::kNestedTuple,
                  fmt::format("a tuple inside PartitionSpec cannot contain a nested tuple: got {} "
                              "with the nested tuple {}",
                              where, nb::cast<std::string>(nb::repr(item))));
    }
    axes.push_back(axis_name(item, where));
  }
  return axes;
}

void init_spec(PartitionSpec* self, nb::args entries) {
  std::vector<SpecEntry> out;
  for (nb::handle entry : entries) out.push_back(spec_entry(entry));
  new (self) PartitionSpec(std::move(out));
}

nb::object entry_to_python(const SpecEntry& entry) {
  if (entry.empty()) return nb::none();
  if (entry.size() == 1) return nb::str(entry.front().c_str());
  nb::list axes;
  for (const std::string& axis : entry) axes.append(nb::str(axis.c_str()));
  return nb::tuple(axes);
}

nb::tuple spec_to_tuple(const PartitionSpec& spec) {
  nb::list entries;
  for (const SpecEntry& entry : spec.entries()) entries.append(entry_to_python(entry));
  return nb::tuple(entries);
}

}  // namespace

PartitionSpec spec_from_python(nb::handle spec, std::string_view argument) {
  if (nb::isinstance<PartitionSpec>(spec)) return nb::cast<PartitionSpec>(spec);
  // JAX's PartitionSpec iterates over its entries, as a tuple does.
  if (!nb::isinstance<nb::str>(spec) && nb::hasattr(spec, "__iter__")) {
    std::vector<SpecEntry> out;
    for (nb::handle entry : nb::iter(spec)) out.push_back(spec_entry(entry));
    return PartitionSpec(std::move(out));
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}: expected a PartitionSpec (reshard.P or jax.sharding.PartitionSpec), not {} {}", argument,
                          nb::cast<std::string>(nb::type_name(spec.type())), nb::cast<std::string>(nb::repr(spec))));
}

size_t spec_hash(const PartitionSpec& spec) {
  std::vector<SpecEntry> entries = spec.entries();
  while (!entries.empty() && entries.back().empty()) entries.pop_back();
  return std::hash<std::string>{}(PartitionSpec(std::move(entries)).to_string());
}

void bind_partition_spec(nb::module_& m) {
  nb::class_<PartitionSpec>(m, "PartitionSpec",
                            "How each leading array dimension is split over mesh axes, as JAX's\n"
                            "``PartitionSpec``: one entry per dimension, each None, an axis name, or a\n"
                            "tuple of axis names (first axis most significant). Missing trailing\n"
                            "entries mean not partitioned; specs compare equal without trailing Nones.")
      .def("__init__", &init_spec, nb::arg("entries"),
           "``PartitionSpec('data', None, ('x', 'y'))``. Raises NestedTupleError for a tuple in a tuple.")
      .def_static("parse", &PartitionSpec::parse, nb::arg("text"),
                  "Parses ``None,data,(a,b)`` or JAX's printed ``P('data', None)``. Raises ParseError.")
      .def("__len__", &PartitionSpec::size)
      .def("__getitem__", [](const PartitionSpec& spec, int64_t i) -> nb::object {
        const int64_t n = static_cast<int64_t>(spec.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) throw nb::index_error("PartitionSpec index out of range");
        return entry_to_python(spec.entries()[static_cast<size_t>(i)]);
      }, nb::sig("def __getitem__(self, index: int, /) -> str | tuple[str, ...] | None"))
      .def("__iter__", [](const PartitionSpec& spec) { return spec_to_tuple(spec).attr("__iter__")(); },
           nb::sig("def __iter__(self) -> collections.abc.Iterator[str | tuple[str, ...] | None]"))
      .def("to_tuple", &spec_to_tuple, nb::sig("def to_tuple(self) -> tuple[str | tuple[str, ...] | None, ...]"), "The entries as a tuple (None, 'x' or ('x', 'y') each).")
      .def_prop_ro("axis_names", &PartitionSpec::axis_names, "Every axis named, in order of appearance.")
      .def("__eq__", [](const PartitionSpec& a, const PartitionSpec& b) { return a == b; }, nb::is_operator())
      .def("__eq__", [](const PartitionSpec&, nb::handle) { return false; })
      .def("__hash__", &spec_hash)
      .def("__repr__", &PartitionSpec::to_string);
}

}  // namespace reshard::python
