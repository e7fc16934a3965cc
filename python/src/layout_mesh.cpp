// Mesh(devices, axis_names), as jax.sharding.Mesh takes them.
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

using namespace nb::literals;

// Device ids from a nested sequence or array of ints, or of objects with an
// `id` (jax.Device): the array's shape is the mesh's.
std::pair<Shape, std::vector<DeviceId>> mesh_devices(nb::handle devices) {
  nb::module_ np = nb::module_::import_("numpy");
  nb::object array = np.attr("asarray")(devices);
  Shape shape = shape_from_python(array.attr("shape"));
  std::vector<DeviceId> ids;
  for (nb::handle d : nb::iter(array.attr("reshape")(-1).attr("tolist")())) {
    ids.push_back(nb::hasattr(d, "id") ? nb::cast<DeviceId>(d.attr("id")) : nb::cast<DeviceId>(d));
  }
  return {std::move(shape), std::move(ids)};
}

std::vector<std::string> axis_names_from_python(nb::handle names) {
  if (nb::isinstance<nb::str>(names)) return {nb::cast<std::string>(names)};
  std::vector<std::string> out;
  for (nb::handle name : nb::iter(names)) {
    if (!nb::isinstance<nb::str>(name)) {
      throw Error(ErrorCode::kInvalidMesh,
                  fmt::format("invalid mesh: axis names must be strings, got {}",
                              nb::cast<std::string>(nb::repr(name))));
    }
    out.push_back(nb::cast<std::string>(name));
  }
  return out;
}

void init_mesh(Mesh* self, nb::handle devices, nb::handle axis_names) {
  auto [shape, ids] = mesh_devices(devices);
  const std::vector<std::string> names = axis_names_from_python(axis_names);
  if (shape.size() != names.size()) {
    throw Error(ErrorCode::kInvalidMesh,
                fmt::format("invalid mesh: the number of dimensions of `devices` ({}) must equal "
                            "the number of axis names ({})",
                            shape.size(), names.size()));
  }
  std::vector<MeshAxis> axes;
  for (size_t a = 0; a < names.size(); ++a) axes.push_back({names[a], shape[a]});
  new (self) Mesh(std::move(axes), std::move(ids));
}

Mesh mesh_from_axes(nb::handle axes, std::optional<std::vector<DeviceId>> devices) {
  std::vector<MeshAxis> out;
  nb::object items = nb::isinstance<nb::dict>(axes) ? nb::borrow(axes).attr("items")() : nb::borrow(axes);
  for (nb::handle item : nb::iter(items)) {
    auto [name, size] = nb::cast<std::pair<std::string, int64_t>>(item);
    out.push_back({std::move(name), size});
  }
  if (!devices) return Mesh::with_default_order(std::move(out));
  return Mesh(std::move(out), std::move(*devices));
}

nb::tuple mesh_axis_names(const Mesh& mesh) {
  nb::list names;
  for (const MeshAxis& axis : mesh.axes()) names.append(nb::str(axis.name.c_str()));
  return nb::tuple(names);
}

nb::dict mesh_shape(const Mesh& mesh) {
  nb::dict shape;
  for (const MeshAxis& axis : mesh.axes()) shape[axis.name.c_str()] = nb::int_(axis.size);
  return shape;
}

nb::object mesh_device_array(const Mesh& mesh) {
  nb::module_ np = nb::module_::import_("numpy");
  Shape sizes;
  for (const MeshAxis& axis : mesh.axes()) sizes.push_back(axis.size);
  return np.attr("asarray")(nb::cast(mesh.devices()), "dtype"_a = "int64").attr("reshape")(shape_to_python(sizes));
}

}  // namespace

void bind_mesh(nb::module_& m) {
  nb::class_<Mesh>(m, "Mesh",
                   "An N-d array of distinct devices with one name per axis.\n\n"
                   "``Mesh(devices, axis_names)`` as in JAX: ``devices`` is an array (or nested\n"
                   "list) of device ids, or of objects with an ``id`` such as ``jax.Device``,\n"
                   "whose shape is the mesh's; its row-major order is the logical device order,\n"
                   "which is part of the mesh.")
      .def("__init__", &init_mesh, nb::arg("devices"), nb::arg("axis_names"),
           nb::sig("def __init__(self, devices: object, axis_names: str | collections.abc.Sequence[str]) -> None"),
           "Builds a mesh from an array of device ids shaped like the mesh. Raises InvalidMeshError.")
      .def_static("from_axes", &mesh_from_axes, nb::arg("axes"), nb::arg("devices") = nb::none(),
                  nb::sig("def from_axes(axes: collections.abc.Mapping[str, int] | collections.abc.Sequence[tuple[str, int]], "
                          "devices: collections.abc.Sequence[int] | None = None) -> Mesh"),
                  "A mesh from {name: size} (or (name, size) pairs) and a flat device list in\n"
                  "row-major mesh order; devices 0..n-1 when omitted.")
      .def_prop_ro("axis_names", &mesh_axis_names, nb::for_getter(nb::sig("def axis_names(self) -> tuple[str, ...]")),
                   "The axis names, in order.")
      .def_prop_ro("shape", &mesh_shape, nb::for_getter(nb::sig("def shape(self) -> dict[str, int]")), "{axis name: size}, in axis order (as jax.sharding.Mesh.shape).")
      .def_prop_ro("axis_sizes", [](const Mesh& mesh) {
        Shape sizes;
        for (const MeshAxis& axis : mesh.axes()) sizes.push_back(axis.size);
        return shape_to_python(sizes);
      }, nb::for_getter(nb::sig("def axis_sizes(self) -> tuple[int, ...]")), "The axis sizes, in order.")
      .def_prop_ro("devices", &mesh_device_array, nb::for_getter(nb::sig("def devices(self) -> numpy.ndarray")), "The device ids as an int64 numpy array of the mesh's shape.")
      .def_prop_ro("device_ids", [](const Mesh& mesh) { return mesh.devices(); },
                   "The device ids in logical (row-major) order.")
      .def_prop_ro("size", &Mesh::size, "Number of devices.")
      .def_prop_ro("ndim", &Mesh::num_axes, "Number of axes.")
      .def("coordinates", &Mesh::coordinates, nb::arg("logical"),
           "Mesh coordinate (one entry per axis) of logical device `logical`.")
      .def("logical_index", &Mesh::logical_index_of, nb::arg("device"),
           "Logical position of a device id in the mesh, or None if the mesh lacks it.")
      .def("__eq__", [](const Mesh& a, const Mesh& b) { return a == b; }, nb::is_operator())
      .def("__eq__", [](const Mesh&, nb::handle) { return false; })
      .def("__hash__", [](const Mesh& mesh) { return std::hash<std::string>{}(mesh.to_string()); })
      .def("__repr__", &Mesh::to_string);
}

}  // namespace reshard::python
