// Topology, Box and the dtype names: the layout layer's plain values.
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

void bind_topology(nb::module_& m) {
  nb::class_<Topology>(m, "Topology",
                       "Every device of a job (ids 0..n-1) with the process that owns it; every\n"
                       "process holds the same one, so every process plans alike.")
      .def("__init__", [](Topology* self, std::vector<int> process_of_device) {
        new (self) Topology(Topology::explicit_processes(std::move(process_of_device)));
      }, nb::arg("process_of_device"), "process_of_device[d] owns device d; processes are 0..P-1.")
      .def_static("uniform", &Topology::uniform, nb::arg("num_devices"), nb::arg("num_processes") = 1,
                  "Device d belongs to process d // (num_devices // num_processes).")
      .def_static("default_for", [](const std::vector<NamedSharding>& shardings, int num_processes) {
        return default_topology(shardings, num_processes);
      }, nb::arg("shardings"), nb::arg("num_processes") = 1,
                  "The topology reshard takes when none is given: devices 0..the largest id the shardings'\n"
                  "meshes name, split over num_processes as uniform splits them (InvalidArgumentError when\n"
                  "they do not split evenly: give a Topology then).")
      .def_prop_ro("num_devices", &Topology::num_devices, "Number of devices.")
      .def_prop_ro("num_processes", &Topology::num_processes, "Number of processes.")
      .def("process_of", &Topology::process_of, nb::arg("device"), "The process owning `device` (UnknownDeviceError if none).")
      .def("devices_of", &Topology::devices_of, nb::arg("process"), "The devices `process` owns, ascending.")
      .def("__eq__", [](const Topology& a, const Topology& b) { return a == b; }, nb::is_operator())
      .def("__eq__", [](const Topology&, nb::handle) { return false; })
      .def("__repr__", [](const Topology& t) {
        return fmt::format("Topology(num_devices={}, num_processes={})", t.num_devices(), t.num_processes());
      });
}

void bind_box(nb::module_& m) {
  nb::class_<Box>(m, "Box", "A hyper-rectangle of array indices: origin and shape per dimension.")
      .def(nb::init<std::vector<int64_t>, Shape>(), nb::arg("origin"), nb::arg("shape"))
      .def_prop_ro("origin", [](const Box& b) { return shape_to_python(b.origin()); },
                   nb::for_getter(nb::sig("def origin(self) -> tuple[int, ...]")), "First index per dimension.")
      .def_prop_ro("shape", [](const Box& b) { return shape_to_python(b.shape()); },
                   nb::for_getter(nb::sig("def shape(self) -> tuple[int, ...]")), "Extent per dimension.")
      .def_prop_ro("slices", &box_to_slices, nb::for_getter(nb::sig("def slices(self) -> tuple[slice, ...]")), "A tuple of slice(begin, end), to index a numpy array with.")
      .def_prop_ro("volume", &Box::volume, "Number of elements.")
      .def_prop_ro("rank", &Box::rank, "Number of dimensions.")
      .def("__eq__", [](const Box& a, const Box& b) { return a == b; }, nb::is_operator())
      .def("__eq__", [](const Box&, nb::handle) { return false; })
      .def("__hash__", [](const Box& b) { return std::hash<std::string>{}(b.to_string()); })
      .def("__repr__", [](const Box& b) { return "Box(" + b.to_string() + ")"; });
}

void bind_dtypes(nb::module_& m) {
  m.def("_dtype_names", [] {
    std::vector<std::string> names;
    for (int i = 0; i < kNumDTypes; ++i) names.emplace_back(dtype_name(static_cast<DType>(i)));
    return names;
  }, "Every safetensors dtype name reshard knows, in the format's order.");
  m.def("_dtype_bits", [](const std::string& name) { return dtype_bits(dtype_from_string(name)); },
        nb::arg("name"), "Bits per element of a dtype given by its safetensors name.");
}

}  // namespace reshard::python
