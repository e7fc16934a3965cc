// NamedSharding(mesh, spec, memory_kind) with JAX's devices_indices_map and friends.
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

void init_sharding(NamedSharding* self, const Mesh& mesh, nb::handle spec_arg, std::optional<std::string> memory_kind,
                   bool uneven) {
  const PartitionSpec spec = spec_from_python(spec_arg, "spec");
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

}  // namespace

void bind_named_sharding(nb::module_& m) {
  nb::class_<NamedSharding>(m, "NamedSharding",
                            "A mesh, a partition spec and a memory kind: which device holds which\n"
                            "slice of an array, with the semantics of jax.sharding.NamedSharding.\n"
                            "Devices are integer ids; `uneven=True` opts into XLA's padded tiles.")
      .def("__init__", &init_sharding, nb::arg("mesh"), nb::arg("spec"), nb::arg("memory_kind") = nb::none(),
           nb::kw_only(), nb::arg("uneven") = false,
           nb::sig("def __init__(self, mesh: Mesh, spec: PartitionSpec | collections.abc.Iterable[str | tuple[str, "
                   "...] | None], memory_kind: str | None = None, *, uneven: bool = False) -> None"),
           "`spec` is a PartitionSpec, JAX's ``jax.sharding.PartitionSpec`` (converted: the same entries) or a\n"
           "tuple of entries. Raises DuplicateAxisError / UnknownAxisError as JAX does, ParseError for an\n"
           "unknown memory kind, InvalidArgumentError for a `spec` of another type.")
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
           "Raises the typed LayoutError (IndivisibleError, RankError...) if this sharding cannot lay out\n"
           "`global_shape`.")
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
      // Every argument may be None (or anything else) here, so that its check names it.
      .def("picture", &sharding_picture, nb::arg("global_shape").none(), nb::arg("labels").none() = nb::none(),
           nb::kw_only(), nb::arg("dtype").none() = nb::none(), nb::arg("platform").none() = "CPU",
           nb::arg("color").none() = false, nb::arg("width").none() = 80,
           nb::sig("def picture(self, global_shape: collections.abc.Sequence[int], labels: collections.abc.Sequence[int | str] | None = None, *, dtype: str | None = None, platform: str = 'CPU', color: bool = False, width: int = 80) -> str | None"),
           "A text picture of which devices hold which block, as jax.debug.visualize_array_sharding\n"
           "draws it (ranks 1 and 2). Other ranks draw the split dimensions only, under a caption that\n"
           "names the shape, `dtype` and every dimension; more than two split dimensions give a grid\n"
           "of the last two per slice of the others. `labels[i]` names device i (e.g. JAX's device ids\n"
           "in a multi-process job; default: the ids); `platform` is the word before a block's labels;\n"
           "`color` adds ANSI backgrounds; `width` (1 to 1000) is the columns to fill. None for an empty\n"
           "array or one with more than 32 blocks a side or 16 grids. Raises InvalidArgumentError\n"
           "naming the argument, or the sharding's error for a shape it cannot lay out.")
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

}  // namespace reshard::python
