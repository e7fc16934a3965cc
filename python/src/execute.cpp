// Bindings of the execute layer, kept thin: a ShardedArray whose shards come
// out as writable uint8 numpy arrays over the C++ buffers (owned by a copy of
// the Buffer, so the memory outlives either side), and the single-process
// operations reshard, to_host and from_host. reshard/array.py gives them
// dtypes, shapes and Python's names.
#include <cstring>
#include <string>
#include <vector>

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "reshard/execute/in_process_transport.h"
#include "reshard/execute/operations.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/error.h"

namespace reshard::python {
namespace {

using ReadOnlyBytes = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using NumpyBytes = nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>;

// A uint8 numpy array over `buffer`'s bytes, sharing them.
NumpyBytes buffer_to_numpy(const Buffer& buffer) {
  auto* owned = new Buffer(buffer);
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Buffer*>(p); });
  const size_t shape[1] = {owned->size()};
  return NumpyBytes(reinterpret_cast<uint8_t*>(owned->data()), 1, shape, owner);
}

// One process and no peers: what the Python front end runs on until it joins
// a multi-process job. A fresh group per call, so threads never share one.
template <typename Body>
auto single_process(const Topology& topology, Body&& body) {
  if (topology.num_processes() != 1) {
    throw Error(ErrorCode::kUnsupported,
                "this operation runs in one process, but the topology has " +
                    std::to_string(topology.num_processes()) + " processes");
  }
  InProcessGroup group(1);
  nb::gil_scoped_release release;
  return body(group.transport(0));
}

ShardedArray from_shard_bytes(nb::handle shape, const std::string& dtype, const NamedSharding& sharding,
                              const Topology& topology, int process, const std::vector<ReadOnlyBytes>& bytes) {
  ShardedArray array = ShardedArray::allocate(shape_from_python(shape), dtype_from_string(dtype), sharding,
                                              topology, process);
  std::vector<Shard>& shards = array.mutable_shards();
  if (bytes.size() != shards.size()) {
    throw Error(ErrorCode::kInvalidArgument, "expected " + std::to_string(shards.size()) +
                                                 " shards for this process, got " + std::to_string(bytes.size()));
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    if (bytes[i].size() != shards[i].buffer.size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "shard of device " + std::to_string(shards[i].device) + " has " + std::to_string(bytes[i].size()) +
                      " bytes, its slice " + shards[i].box.to_string() + " needs " +
                      std::to_string(shards[i].buffer.size()));
    }
    if (bytes[i].size() != 0) std::memcpy(shards[i].buffer.data(), bytes[i].data(), bytes[i].size());
  }
  return array;
}

ShardedArray from_host(ReadOnlyBytes bytes, nb::handle shape, const std::string& dtype, const NamedSharding& target,
                       const Topology& topology) {
  const HostView host{shape_from_python(shape), dtype_from_string(dtype),
                      {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}};
  return single_process(topology, [&](Transport& transport) { return reshard::from_host(host, target, topology, transport); });
}

void bind_sharded_array(nb::module_& m) {
  nb::class_<Shard>(m, "Shard", "One device's slice of a sharded array.")
      .def_ro("device", &Shard::device, "The device id.")
      .def_ro("box", &Shard::box, "The slice, in global coordinates.")
      .def("_bytes", [](const Shard& s) { return buffer_to_numpy(s.buffer); },
           "The slice's elements (row-major) as a writable uint8 array sharing the buffer.");

  nb::class_<ShardedArray>(m, "_ShardedArray", "One process's shards of a global array (see reshard.ShardedArray).")
      .def_static("allocate", [](nb::handle shape, const std::string& dtype, const NamedSharding& sharding,
                                 const Topology& topology, int process) {
        return ShardedArray::allocate(shape_from_python(shape), dtype_from_string(dtype), sharding, topology, process);
      }, nb::arg("shape"), nb::arg("dtype"), nb::arg("sharding"), nb::arg("topology"), nb::arg("process"),
         "This process's shards, allocated and uninitialised.")
      .def_static("from_shard_bytes", &from_shard_bytes, nb::arg("shape"), nb::arg("dtype"), nb::arg("sharding"),
                  nb::arg("topology"), nb::arg("process"), nb::arg("shards"),
                  "This process's shards (mesh order) copied from uint8 arrays of their bytes.")
      .def_prop_ro("shape", [](const ShardedArray& a) { return shape_to_python(a.shape()); },
                   nb::for_getter(nb::sig("def shape(self) -> tuple[int, ...]")), "The global shape.")
      .def_prop_ro("dtype", [](const ShardedArray& a) { return std::string(dtype_name(a.dtype())); },
                   "The safetensors dtype name.")
      .def_prop_ro("sharding", &ShardedArray::sharding, "The layout.")
      .def_prop_ro("topology", &ShardedArray::topology, "The job's topology.")
      .def_prop_ro("process", &ShardedArray::process, "The process whose shards these are.")
      .def_prop_ro("shards", &ShardedArray::shards, "This process's shards, in mesh order.")
      .def("shares_memory_with", [](const ShardedArray& a, const ShardedArray& b) {
        if (a.shards().size() != b.shards().size()) return false;
        for (size_t i = 0; i < a.shards().size(); ++i) {
          if (!a.shards()[i].buffer.shares_memory_with(b.shards()[i].buffer)) return false;
        }
        return true;
      }, nb::arg("other"), "Whether every shard shares its buffer with `other`'s.");

  m.def("_reshard", [](const ShardedArray& array, const NamedSharding& target) {
    return single_process(array.topology(), [&](Transport& t) { return reshard_array(array, target, t); });
  }, nb::arg("array"), nb::arg("target"), "The array laid out by `target` (one process).");
  m.def("_to_host", [](const ShardedArray& array) {
    const HostArray host = single_process(array.topology(), [&](Transport& t) { return reshard::to_host(array, t); });
    return buffer_to_numpy(host.buffer);
  }, nb::arg("array"), "The whole array's bytes, row-major, as a uint8 numpy array (one process).");
  m.def("_from_host", &from_host, nb::arg("bytes"), nb::arg("shape"), nb::arg("dtype"), nb::arg("target"),
        nb::arg("topology"), "A host array's bytes placed with `target` (one process).");
}

}  // namespace

void bind_execute(nb::module_& m) { bind_sharded_array(m); }

}  // namespace reshard::python
