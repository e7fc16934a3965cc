// NamedSharding: a mesh, a partition spec and a memory kind, with JAX's index map.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/mesh.h"
#include "reshard/layout/partition_spec.h"
#include "reshard/layout/topology.h"

namespace reshard {

// How one array dimension is cut: its chunks, in chunk-index order.
struct DimTiling {
  int64_t num_chunks = 1;
  std::vector<Interval> chunks;  // chunk i covers chunks[i] (possibly empty if uneven)
};

// The whole tiling of an array: per-dimension cuts, and each logical device's
// chunk index along every dimension. Everything else derives from this.
struct Tiling {
  std::vector<DimTiling> dims;
  int64_t num_devices = 0;
  // Every logical device's chunk index along each dimension, flat
  // ([logical device][dim], row-major): one allocation rather than one per
  // device, as planners tile every tensor of a model.
  std::vector<int64_t> chunk_indices;

  // Logical device `logical`'s chunk index along every dimension.
  std::span<const int64_t> chunk_of_device(int64_t logical) const {
    return std::span(chunk_indices).subspan(static_cast<size_t>(logical) * dims.size(), dims.size());
  }

  // The slice held by logical device `logical`.
  Box box_of(int64_t logical) const;
};

class NamedSharding {
 public:
  NamedSharding() = default;
  NamedSharding(Mesh mesh, PartitionSpec spec, MemoryKind memory_kind = MemoryKind::kDevice,
                bool uneven = false);

  const Mesh& mesh() const { return mesh_; }
  const PartitionSpec& spec() const { return spec_; }
  MemoryKind memory_kind() const { return memory_kind_; }
  bool uneven() const { return uneven_; }

  // The same sharding in another memory kind.
  NamedSharding with_memory_kind(MemoryKind kind) const;

  // Throws when this sharding does not fit `shape`, with the typed error:
  // kDuplicateAxis, kUnknownAxis, kRank, and kIndivisible (unless uneven).
  void validate(const Shape& shape) const;

  // Chunks per dimension, product of the named axes' sizes (validates the spec).
  std::vector<int64_t> num_chunks(size_t rank) const;

  // The tiling of `shape` (validates first). The primitive the rest uses.
  Tiling tiling(const Shape& shape) const;

  // The slice each logical device holds, in mesh order (IFRT's IndexDomains).
  std::vector<Box> index_domains(const Shape& shape) const;

  // Shape of every shard; nullopt in uneven mode (shards may differ).
  std::optional<Shape> shard_shape(const Shape& shape) const;

  // Per logical device: how many earlier devices hold the same slice.
  std::vector<int64_t> replica_ids(const Shape& shape) const;

  // Whether every device holds the whole array.
  bool is_fully_replicated() const;

  // Whether `process` owns every device of the mesh.
  bool is_fully_addressable(const Topology& topology, int process) const;

  // (device id, slice) for each device `process` owns, in mesh order.
  std::vector<std::pair<DeviceId, Box>> addressable_index_map(const Shape& shape,
                                                              const Topology& topology,
                                                              int process) const;

  // "NamedSharding(mesh=Mesh('x': 4), spec=PartitionSpec('x',))".
  std::string to_string() const;

  bool operator==(const NamedSharding&) const = default;

 private:
  Mesh mesh_;
  PartitionSpec spec_;
  MemoryKind memory_kind_ = MemoryKind::kDevice;
  bool uneven_ = false;
};

// The topology a job has when the caller gives none: devices 0..the largest
// id any of the shardings' meshes names (one device when there are none),
// split over `num_processes` as Topology::uniform splits them.
// Error(kInvalidArgument) naming both counts, and saying to give a topology,
// when they do not split evenly.
Topology default_topology(std::span<const NamedSharding> shardings, int num_processes);

}  // namespace reshard
