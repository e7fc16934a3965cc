// ShardedArray: one process's part of a global array laid out by a NamedSharding.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "reshard/execute/buffer.h"
#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/sharding.h"
#include "reshard/layout/topology.h"

namespace reshard {

// One device's slice: the device, the slice's box in global coordinates, and
// its elements in row-major order of the box.
struct Shard {
  DeviceId device = 0;
  Box box;
  Buffer buffer;
};

// Writes the element at a global index into `out` (exactly element_bytes long).
using ElementFunction = std::function<void(std::span<const int64_t> index, std::span<std::byte> out)>;

// The global shape, dtype, sharding and topology are the same on every process;
// the shards are this process's own (its devices of the mesh, in mesh order).
// Copies share the shards' buffers.
class ShardedArray {
 public:
  // Checks the sharding against the shape and topology, and that `shards` are
  // exactly this process's devices of the mesh in mesh order, each with its
  // slice and a buffer of the slice's size. Throws Error(kInvalidArgument) or
  // the sharding's typed errors; Error(kUnsupported) for sub-byte dtypes.
  ShardedArray(Shape shape, DType dtype, NamedSharding sharding, Topology topology, int process,
               std::vector<Shard> shards);

  // This process's shards, allocated and uninitialised.
  static ShardedArray allocate(Shape shape, DType dtype, NamedSharding sharding, Topology topology,
                               int process);

  // This process's shards, each element set by `element` from its global index.
  static ShardedArray from_function(Shape shape, DType dtype, NamedSharding sharding, Topology topology,
                                    int process, const ElementFunction& element);

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  const NamedSharding& sharding() const { return sharding_; }
  const Topology& topology() const { return topology_; }
  int process() const { return process_; }

  // Bytes per element (whole bytes: sub-byte dtypes are rejected).
  size_t element_bytes() const { return element_bytes_; }

  // This process's shards, in mesh order.
  const std::vector<Shard>& shards() const { return shards_; }

  // The shard of `device`; throws Error(kUnknownDevice) unless this process
  // holds one for it.
  const Shard& shard(DeviceId device) const;

  // The bytes of the `index`-th shard (mesh order), or of `device`'s, to
  // write into. Only the bytes: the shards' devices, boxes and buffers stay
  // as the constructor checked them. Error(kInvalidArgument) for a read-only
  // buffer (see Buffer), Error(kUnknownDevice) for a device not held here.
  std::span<std::byte> writable_bytes(size_t index);
  std::span<std::byte> writable_bytes_of(DeviceId device);

  // The bytes of the element at `global_index` in `device`'s shard (which
  // must hold it; else Error(kInvalidArgument)).
  std::span<const std::byte> element(DeviceId device, std::span<const int64_t> global_index) const;

  // Throws Error(kInvalidArgument) naming the first read-only shard, if any:
  // what an operation writing into this array checks before it starts.
  void check_writable() const;

  // The same array over the same memory, every shard read-only: what an
  // operation that moves nothing returns, so that writing into its result
  // cannot change the array it was given.
  ShardedArray read_only_alias() const;

  // The same array seen in another topology that has every device of this
  // one's mesh with the same owners (as the host-transfer plans use). The
  // shards are shared, not copied.
  ShardedArray in_topology(Topology topology) const;

 private:
  Shape shape_;
  DType dtype_ = DType::kF32;
  NamedSharding sharding_;
  Topology topology_;
  int process_ = 0;
  size_t element_bytes_ = 0;
  std::vector<Shard> shards_;
};

// Bytes per element of `dtype`; Error(kUnsupported) naming it for 4- and
// 6-bit types, whose elements do not start on byte boundaries.
size_t whole_element_bytes(DType dtype);

}  // namespace reshard
