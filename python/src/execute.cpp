// Bindings of the execute layer, kept thin: a ShardedArray whose shards come
// out as uint8 numpy arrays over the C++ buffers (owned by a copy of the
// Buffer, so the memory outlives either side) and can be built over numpy
// arrays' own memory, and the operations reshard, reshard_into, to_host and
// from_host, each over a transport (None: one process). reshard/array.py
// gives them dtypes, shapes and Python's names.
#include <optional>
#include <string>
#include <vector>

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "reshard/execute/cached_memory.h"
#include "reshard/execute/operations.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/error.h"
#include "transport_scope.h"

namespace reshard::python {
namespace {

using ReadOnlyBytes = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// The shards adopt the memory of `bytes` (objects exporting C-contiguous
// buffers: numpy arrays of the shards' bytes), read-only where it is.
ShardedArray from_shard_bytes(nb::handle shape, const std::string& dtype, const NamedSharding& sharding,
                              const Topology& topology, int process, const std::vector<nb::object>& bytes) {
  const Shape global = shape_from_python(shape);
  const DType type = dtype_from_string(dtype);
  const auto slices = sharding.addressable_index_map(global, topology, process);
  if (bytes.size() != slices.size()) {
    throw Error(ErrorCode::kInvalidArgument, "expected " + std::to_string(slices.size()) +
                                                 " shards for this process, got " + std::to_string(bytes.size()));
  }
  std::vector<Shard> shards;
  shards.reserve(slices.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    shards.push_back(Shard{slices[i].first, slices[i].second, adopt_python_buffer(bytes[i])});
  }
  // The constructor checks every buffer's size against its slice.
  return ShardedArray(global, type, sharding, topology, process, std::move(shards));
}

// With a root, only the root's bytes are read (the others pass any, usually none).
ShardedArray from_host(ReadOnlyBytes bytes, nb::handle shape, const std::string& dtype, const NamedSharding& target,
                       const Topology& topology, Transport* transport, std::optional<int> root) {
  const HostView host{shape_from_python(shape), dtype_from_string(dtype),
                      {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}};
  return with_transport(transport, topology, [&](Transport& t) {
    if (root) return reshard::from_host(host, *root, target, topology, t);
    return reshard::from_host(host, target, topology, t);
  });
}

// The topology a batch runs in (the operation checks that all agree).
// Without a transport, every array must be of one process.
const Topology& topology_of(const std::vector<ShardedArray>& arrays, const Transport* transport) {
  if (transport == nullptr) {
    for (const ShardedArray& array : arrays) check_one_process(array.topology());
  }
  return arrays.front().topology();
}

bool shares_memory(const ShardedArray& a, const ShardedArray& b) {
  if (a.shards().size() != b.shards().size()) return false;
  for (size_t i = 0; i < a.shards().size(); ++i) {
    if (!a.shards()[i].buffer.shares_memory_with(b.shards()[i].buffer)) return false;
  }
  return true;
}

void bind_sharded_array(nb::module_& m) {
  nb::class_<Shard>(m, "Shard", "One device's slice of a sharded array.")
      .def_ro("device", &Shard::device, "The device id.")
      .def_ro("box", &Shard::box, "The slice, in global coordinates.")
      .def_prop_ro("writable", [](const Shard& s) { return s.buffer.writable(); },
                   "Whether the slice's memory may be written (not for a read-only numpy array or a map).")
      .def("_bytes", [](const Shard& s) { return buffer_to_numpy(s.buffer); },
           "The slice's elements (row-major) as a uint8 array sharing the buffer (read-only if it is).");

  nb::class_<ShardedArray>(m, "_ShardedArray", "One process's shards of a global array (see reshard.ShardedArray).")
      .def_static("allocate", [](nb::handle shape, const std::string& dtype, const NamedSharding& sharding,
                                 const Topology& topology, int process) {
        return ShardedArray::allocate(shape_from_python(shape), dtype_from_string(dtype), sharding, topology, process);
      }, nb::arg("shape"), nb::arg("dtype"), nb::arg("sharding"), nb::arg("topology"), nb::arg("process"),
         "This process's shards, allocated and uninitialised.")
      .def_static("from_shard_bytes", &from_shard_bytes, nb::arg("shape"), nb::arg("dtype"), nb::arg("sharding"),
                  nb::arg("topology"), nb::arg("process"), nb::arg("shards"),
                  nb::sig("def from_shard_bytes(shape: collections.abc.Sequence[int], dtype: str, sharding: NamedSharding, "
                          "topology: Topology, process: int, shards: collections.abc.Sequence[numpy.ndarray]) -> _ShardedArray"),
                  "This process's shards (mesh order) over the memory of C-contiguous uint8 arrays of\n"
                  "their bytes, without a copy (read-only where an array is).")
      .def_prop_ro("shape", [](const ShardedArray& a) { return shape_to_python(a.shape()); },
                   nb::for_getter(nb::sig("def shape(self) -> tuple[int, ...]")), "The global shape.")
      .def_prop_ro("dtype", [](const ShardedArray& a) { return std::string(dtype_name(a.dtype())); },
                   "The safetensors dtype name.")
      .def_prop_ro("sharding", &ShardedArray::sharding, "The layout.")
      .def_prop_ro("topology", &ShardedArray::topology, "The job's topology.")
      .def_prop_ro("process", &ShardedArray::process, "The process whose shards these are.")
      .def_prop_ro("shards", &ShardedArray::shards, "This process's shards, in mesh order.")
      .def("shares_memory_with", &shares_memory, nb::arg("other"),
           "Whether every shard shares its buffer with `other`'s.");
}

void bind_operations(nb::module_& m) {
  m.def("_reshard", [](const ShardedArray& array, const NamedSharding& target, Transport* transport) {
    return with_transport(transport, array.topology(), [&](Transport& t) { return reshard_array(array, target, t); });
  }, nb::arg("array"), nb::arg("target"), nb::arg("transport").none() = nb::none(),
        "The array laid out by `target` (collective over `transport`; None: one process).");
  m.def("_reshard_into", [](const ShardedArray& array, ShardedArray& target, Transport* transport) {
    target.check_writable();
    with_transport(transport, array.topology(), [&](Transport& t) { return reshard_into(array, target, t); });
  }, nb::arg("array"), nb::arg("target"), nb::arg("transport").none() = nb::none(),
        "Writes the array into `target`'s shards, laid out as they are (InvalidArgumentError if read-only).");
  m.def("_to_host", [](const ShardedArray& array, Transport* transport) {
    const HostArray host =
        with_transport(transport, array.topology(), [&](Transport& t) { return reshard::to_host(array, t); });
    return buffer_to_numpy(host.buffer);
  }, nb::arg("array"), nb::arg("transport").none() = nb::none(),
        nb::sig("def _to_host(array: _ShardedArray, transport: Transport | None = None) -> numpy.ndarray"),
        "The whole array's bytes, row-major, as a uint8 numpy array on every process.");
  m.def("_to_host_root", [](const ShardedArray& array, int root, Transport* transport) -> nb::object {
    const std::optional<HostArray> host = with_transport(
        transport, array.topology(), [&](Transport& t) { return reshard::to_host(array, t, root); });
    if (!host) return nb::none();
    return buffer_to_numpy(host->buffer);
  }, nb::arg("array"), nb::arg("root"), nb::arg("transport").none() = nb::none(),
        nb::sig("def _to_host_root(array: _ShardedArray, root: int, transport: Transport | None = None) "
                "-> numpy.ndarray | None"),
        "The whole array's bytes on process `root` only (None on the others, which send it what it lacks).");
  m.def("_reshard_arrays", [](const std::vector<ShardedArray>& arrays, const std::vector<NamedSharding>& targets,
                              Transport* transport) {
    if (arrays.empty()) return std::vector<ShardedArray>{};
    return with_transport(transport, topology_of(arrays, transport),
                          [&](Transport& t) { return reshard_arrays(arrays, targets, t); });
  }, nb::arg("arrays"), nb::arg("targets"), nb::arg("transport").none() = nb::none(),
        "Each array laid out by its target, all in one operation.");
  m.def("_to_host_arrays", [](const std::vector<ShardedArray>& arrays, Transport* transport) {
    std::vector<nb::object> out;
    if (arrays.empty()) return out;
    const std::vector<HostArray> hosts =
        with_transport(transport, topology_of(arrays, transport), [&](Transport& t) { return reshard::to_host(arrays, t); });
    out.reserve(hosts.size());
    for (const HostArray& host : hosts) out.push_back(buffer_to_numpy(host.buffer));
    return out;
  }, nb::arg("arrays"), nb::arg("transport").none() = nb::none(),
        nb::sig("def _to_host_arrays(arrays: collections.abc.Sequence[_ShardedArray], transport: Transport | None = None) "
                "-> list[numpy.ndarray]"),
        "Every array's bytes, row-major, as uint8 numpy arrays, in one operation.");
  m.def("_from_host", &from_host, nb::arg("bytes"), nb::arg("shape"), nb::arg("dtype"), nb::arg("target"),
        nb::arg("topology"), nb::arg("transport").none() = nb::none(), nb::arg("root").none() = nb::none(),
        "A host array's bytes placed with `target`: each process its shards. Without a root the bytes are "
        "whole on every process and nothing is sent; with one only the root's are read and it sends each "
        "process its shards' elements.");
}

}  // namespace

void bind_cached_memory(nb::module_& m) {
  m.def(
      "_cached_memory",
      [] {
        const CachedMemory held = cached_memory();
        return std::vector<uint64_t>{held.shared_arena_bytes, held.staging_bytes, held.limit_bytes};
      },
      "Bytes kept for the next call: [shared arena, staging, the bound on each].");
  m.def("_set_cached_memory_limit", &set_cached_memory_limit, nb::arg("limit"),
        "The bound on each cache; a lower one gives the excess back at once.");
  m.def("_release_cached_memory", &release_cached_memory, "Gives every kept page back to the kernel now.");
}

void bind_execute(nb::module_& m) {
  bind_transport(m);
  bind_sharded_array(m);
  bind_operations(m);
  bind_cached_memory(m);
}

}  // namespace reshard::python
