// Bindings of the layout layer in JAX's idiom: Mesh(devices, axis_names),
// PartitionSpec(*entries), NamedSharding(mesh, spec, memory_kind) with
// devices_indices_map and friends, Topology, Box.
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

// --- Mesh ------------------------------------------------------------------

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

// --- PartitionSpec -----------------------------------------------------------

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

// --- NamedSharding -----------------------------------------------------------

void init_sharding(NamedSharding* self, const Mesh& mesh, const PartitionSpec& spec,
                   std::optional<std::string> memory_kind, bool uneven) {
  // As JAX does at construction: repeated and unknown axes are errors at once
  // (the rank check waits for a shape).
  spec.validate(mesh, spec.size());
  const MemoryKind kind = memory_kind ? memory_kind_from_string(*memory_kind) : MemoryKind::kDevice;
  new (self) NamedSharding(mesh, spec, kind, uneven);
}

nb::dict devices_indices_map(const NamedSharding& sharding, nb::handle shape_arg) {
  const Shape shape = shape_from_python(shape_arg);
  const Tiling tiling = sharding.tiling(shape);
  const std::vector<int64_t> chunks = sharding.num_chunks(shape.size());
  nb::dict out;
  const std::vector<DeviceId>& devices = sharding.mesh().devices();
  for (size_t logical = 0; logical < devices.size(); ++logical) {
    out[nb::int_(devices[logical])] = box_to_index(tiling.box_of(static_cast<int64_t>(logical)), chunks);
  }
  return out;
}

nb::dict addressable_devices_indices_map(const NamedSharding& sharding, nb::handle shape_arg,
                                         const Topology& topology, int process) {
  const Shape shape = shape_from_python(shape_arg);
  const std::vector<int64_t> chunks = sharding.num_chunks(shape.size());
  nb::dict out;
  for (const auto& [device, box] : sharding.addressable_index_map(shape, topology, process)) {
    out[nb::int_(device)] = box_to_index(box, chunks);
  }
  return out;
}

nb::dict replica_ids(const NamedSharding& sharding, nb::handle shape_arg) {
  const std::vector<int64_t> ids = sharding.replica_ids(shape_from_python(shape_arg));
  nb::dict out;
  const std::vector<DeviceId>& devices = sharding.mesh().devices();
  for (size_t logical = 0; logical < devices.size(); ++logical) out[nb::int_(devices[logical])] = nb::int_(ids[logical]);
  return out;
}

nb::object shard_shape(const NamedSharding& sharding, nb::handle shape_arg) {
  const std::optional<Shape> shape = sharding.shard_shape(shape_from_python(shape_arg));
  if (!shape) return nb::none();
  return shape_to_python(*shape);
}

std::vector<DeviceId> addressable_devices(const NamedSharding& sharding, const Topology& topology, int process) {
  std::vector<DeviceId> out;
  for (DeviceId d : sharding.mesh().devices()) {
    if (topology.process_of(d) == process) out.push_back(d);
  }
  return out;
}

void bind_named_sharding(nb::module_& m) {
  nb::class_<NamedSharding>(m, "NamedSharding",
                            "A mesh, a partition spec and a memory kind: which device holds which\n"
                            "slice of an array, with the semantics of jax.sharding.NamedSharding.\n"
                            "Devices are integer ids; `uneven=True` opts into XLA's padded tiles.")
      .def("__init__", &init_sharding, nb::arg("mesh"), nb::arg("spec"), nb::arg("memory_kind") = nb::none(),
           nb::kw_only(), nb::arg("uneven") = false,
           "Raises DuplicateAxisError / UnknownAxisError as JAX does, ParseError for an unknown memory kind.")
      .def_prop_ro("mesh", &NamedSharding::mesh, "The mesh.")
      .def_prop_ro("spec", &NamedSharding::spec, "The partition spec.")
      .def_prop_ro("memory_kind", [](const NamedSharding& s) { return std::string(memory_kind_name(s.memory_kind())); },
                   "'device', 'pinned_host' or 'unpinned_host'.")
      .def_prop_ro("uneven", &NamedSharding::uneven, "Whether chunks may be uneven (XLA's padding rule).")
      .def("with_memory_kind", [](const NamedSharding& s, const std::string& kind) {
        return s.with_memory_kind(memory_kind_from_string(kind));
      }, nb::arg("kind"), "The same sharding in another memory kind.")
      .def("validate", [](const NamedSharding& s, nb::handle shape) { s.validate(shape_from_python(shape)); },
           nb::arg("global_shape"),
           nb::sig("def validate(self, global_shape: collections.abc.Sequence[int]) -> None"),
           "Raises the typed error of spec/sharding.md if this sharding cannot lay out `global_shape`.")
      .def("devices_indices_map", &devices_indices_map, nb::arg("global_shape"),
           nb::sig("def devices_indices_map(self, global_shape: collections.abc.Sequence[int]) -> dict[int, tuple[slice, ...]]"),
           "{device id: index tuple} for every device, as JAX returns it (slice(None) where unsplit).")
      .def("addressable_devices_indices_map", &addressable_devices_indices_map, nb::arg("global_shape"),
           nb::arg("topology"), nb::arg("process"),
           nb::sig("def addressable_devices_indices_map(self, global_shape: collections.abc.Sequence[int], topology: Topology, process: int) -> dict[int, tuple[slice, ...]]"), "devices_indices_map restricted to `process`'s devices.")
      .def("index_domains", [](const NamedSharding& s, nb::handle shape) {
        return s.index_domains(shape_from_python(shape));
      }, nb::arg("global_shape"),
           nb::sig("def index_domains(self, global_shape: collections.abc.Sequence[int]) -> list[Box]"), "The Box each logical device holds, in mesh order.")
      .def("shard_shape", &shard_shape, nb::arg("global_shape"),
           nb::sig("def shard_shape(self, global_shape: collections.abc.Sequence[int]) -> tuple[int, ...] | None"),
           "The shape of every shard (None in uneven mode, where shards may differ).")
      .def("replica_ids", &replica_ids, nb::arg("global_shape"),
           nb::sig("def replica_ids(self, global_shape: collections.abc.Sequence[int]) -> dict[int, int]"),
           "{device id: replica id}: how many earlier devices (mesh order) hold the same slice.")
      .def("num_chunks", [](const NamedSharding& s, size_t rank) { return shape_to_python(s.num_chunks(rank)); },
           nb::arg("rank"), nb::sig("def num_chunks(self, rank: int) -> tuple[int, ...]"), "Chunks per dimension for an array of rank `rank`.")
      .def_prop_ro("is_fully_replicated", &NamedSharding::is_fully_replicated, "Whether every device holds the whole array.")
      .def("is_fully_addressable", &NamedSharding::is_fully_addressable, nb::arg("topology"), nb::arg("process"),
           "Whether `process` owns every device of the mesh.")
      .def("addressable_devices", &addressable_devices, nb::arg("topology"), nb::arg("process"),
           "The mesh's devices that `process` owns, in mesh order.")
      .def_prop_ro("device_set", [](const NamedSharding& s) {
        nb::set out;
        for (DeviceId d : s.mesh().devices()) out.add(nb::int_(d));
        return out;
      }, nb::for_getter(nb::sig("def device_set(self) -> set[int]")), "The set of device ids.")
      .def_prop_ro("num_devices", [](const NamedSharding& s) { return s.mesh().size(); }, "Number of devices.")
      .def("__eq__", [](const NamedSharding& a, const NamedSharding& b) { return a == b; }, nb::is_operator())
      .def("__eq__", [](const NamedSharding&, nb::handle) { return false; })
      .def("__hash__", [](const NamedSharding& s) {
        return std::hash<std::string>{}(s.mesh().to_string()) ^ (spec_hash(s.spec()) * 31) ^
               (static_cast<size_t>(s.memory_kind()) << 1) ^ static_cast<size_t>(s.uneven());
      })
      .def("__repr__", &NamedSharding::to_string);
}

// --- Topology, Box, dtypes ---------------------------------------------------

void bind_topology(nb::module_& m) {
  nb::class_<Topology>(m, "Topology",
                       "Every device of a job (ids 0..n-1) with the process that owns it; every\n"
                       "process holds the same one, so every process plans alike.")
      .def("__init__", [](Topology* self, std::vector<int> process_of_device) {
        new (self) Topology(Topology::explicit_processes(std::move(process_of_device)));
      }, nb::arg("process_of_device"), "process_of_device[d] owns device d; processes are 0..P-1.")
      .def_static("uniform", &Topology::uniform, nb::arg("num_devices"), nb::arg("num_processes") = 1,
                  "Device d belongs to process d // (num_devices // num_processes).")
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

}  // namespace

void bind_layout(nb::module_& m) {
  bind_dtypes(m);
  bind_topology(m);
  bind_box(m);
  bind_mesh(m);
  bind_partition_spec(m);
  bind_named_sharding(m);
}

}  // namespace reshard::python
