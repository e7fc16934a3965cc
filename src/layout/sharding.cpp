#include "reshard/layout/sharding.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard {

using layout_detail::checked_add;

namespace {

std::string shape_repr(const Shape& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape.front());
  return fmt::format("({})", fmt::join(shape, ", "));
}

// min(k * tile, size) without forming k * tile, which can pass INT64_MAX when
// the padded tiles overshoot a huge dimension.
int64_t clamped_tile_end(int64_t k, int64_t tile, int64_t size) {
  return tile == 0 || k > size / tile ? size : k * tile;
}

// Chunk i of n over [0, size): even split, or XLA's padded rule when uneven.
Interval chunk_interval(int64_t size, int64_t n, int64_t i, bool uneven) {
  if (!uneven) return {i * (size / n), (i + 1) * (size / n)};
  const int64_t tile = size / n + (size % n != 0 ? 1 : 0);
  return {clamped_tile_end(i, tile, size), clamped_tile_end(i + 1, tile, size)};
}

}  // namespace

Box Tiling::box_of(int64_t logical) const {
  const std::span<const int64_t> chunk = chunk_of_device(logical);
  std::vector<Interval> parts(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) parts[d] = dims[d].chunks[static_cast<size_t>(chunk[d])];
  return Box::from_intervals(parts);
}

NamedSharding::NamedSharding(Mesh mesh, PartitionSpec spec, MemoryKind memory_kind, bool uneven)
    : mesh_(std::move(mesh)), spec_(std::move(spec)), memory_kind_(memory_kind), uneven_(uneven) {}

NamedSharding NamedSharding::with_memory_kind(MemoryKind kind) const {
  NamedSharding copy = *this;
  copy.memory_kind_ = kind;
  return copy;
}

std::vector<int64_t> NamedSharding::num_chunks(size_t rank) const {
  spec_.validate(mesh_, rank);
  std::vector<int64_t> chunks(rank, 1);
  for (size_t d = 0; d < spec_.size(); ++d) {
    for (const std::string& axis : spec_.entries()[d]) chunks[d] *= mesh_.axis_size(*mesh_.axis_index(axis));
  }
  return chunks;
}

void NamedSharding::validate(const Shape& shape) const {
  const std::vector<int64_t> chunks = num_chunks(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("shape {} has a negative dimension {}", shape_repr(shape), d));
    }
    if (!uneven_ && shape[d] % chunks[d] != 0) {
      throw Error(ErrorCode::kIndivisible,
                  fmt::format("the sharding {} implies that the global size of dimension {} should "
                              "be divisible by {}, but it is equal to {} (full shape: {})",
                              to_string(), d, chunks[d], shape[d], shape_repr(shape)));
    }
  }
}

Tiling NamedSharding::tiling(const Shape& shape) const {
  validate(shape);
  const std::vector<int64_t> chunks = num_chunks(shape.size());
  Tiling tiling;
  tiling.dims.resize(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    tiling.dims[d].num_chunks = chunks[d];
    tiling.dims[d].chunks.reserve(static_cast<size_t>(chunks[d]));
    for (int64_t i = 0; i < chunks[d]; ++i) {
      tiling.dims[d].chunks.push_back(chunk_interval(shape[d], chunks[d], i, uneven_));
    }
  }
  // Axis index of every name in each entry, resolved once.
  std::vector<std::vector<size_t>> entry_axes(spec_.size());
  for (size_t d = 0; d < spec_.size(); ++d) {
    for (const std::string& axis : spec_.entries()[d]) entry_axes[d].push_back(*mesh_.axis_index(axis));
  }
  tiling.num_devices = mesh_.size();
  tiling.chunk_indices.assign(static_cast<size_t>(mesh_.size()) * shape.size(), 0);
  // Mesh coordinates advance as an odometer (last axis fastest) rather than
  // being recomputed per device: planners call this for every tensor.
  std::vector<int64_t> coords(mesh_.num_axes(), 0);
  for (int64_t logical = 0; logical < mesh_.size(); ++logical) {
    int64_t* chunk = tiling.chunk_indices.data() + static_cast<size_t>(logical) * shape.size();
    for (size_t d = 0; d < entry_axes.size(); ++d) {
      for (size_t axis : entry_axes[d]) chunk[d] = chunk[d] * mesh_.axis_size(axis) + coords[axis];
    }
    for (size_t a = coords.size(); a-- > 0 && ++coords[a] == mesh_.axis_size(a);) coords[a] = 0;
  }
  return tiling;
}

std::vector<Box> NamedSharding::index_domains(const Shape& shape) const {
  const Tiling t = tiling(shape);
  std::vector<Box> boxes;
  boxes.reserve(static_cast<size_t>(mesh_.size()));
  for (int64_t logical = 0; logical < mesh_.size(); ++logical) boxes.push_back(t.box_of(logical));
  return boxes;
}

std::optional<Shape> NamedSharding::shard_shape(const Shape& shape) const {
  validate(shape);
  if (uneven_) return std::nullopt;
  const std::vector<int64_t> chunks = num_chunks(shape.size());
  Shape out(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) out[d] = shape[d] / chunks[d];
  return out;
}

std::vector<int64_t> NamedSharding::replica_ids(const Shape& shape) const {
  // Keyed by the slice itself: in uneven mode distinct chunks can be equal (empty).
  std::map<std::pair<std::vector<int64_t>, Shape>, int64_t> seen;
  std::vector<int64_t> ids;
  for (const Box& box : index_domains(shape)) ids.push_back(seen[{box.origin(), box.shape()}]++);
  return ids;
}

bool NamedSharding::is_fully_replicated() const {
  if (mesh_.size() == 1) return true;
  int64_t product = 1;
  for (const std::string& axis : spec_.axis_names()) {
    if (auto index = mesh_.axis_index(axis)) product *= mesh_.axis_size(*index);
  }
  return product == 1;
}

bool NamedSharding::is_fully_addressable(const Topology& topology, int process) const {
  for (DeviceId d : mesh_.devices()) {
    if (topology.process_of(d) != process) return false;
  }
  return true;
}

std::vector<std::pair<DeviceId, Box>> NamedSharding::addressable_index_map(
    const Shape& shape, const Topology& topology, int process) const {
  const Tiling t = tiling(shape);
  topology.check_contains(mesh_.devices(), "the mesh");
  std::vector<std::pair<DeviceId, Box>> out;
  for (int64_t logical = 0; logical < mesh_.size(); ++logical) {
    const DeviceId d = mesh_.devices()[static_cast<size_t>(logical)];
    if (topology.process_of(d) == process) out.emplace_back(d, t.box_of(logical));
  }
  return out;
}

std::string NamedSharding::to_string() const {
  std::string out = fmt::format("NamedSharding(mesh={}, spec={}", mesh_.to_string(), spec_.to_string());
  if (memory_kind_ != MemoryKind::kDevice) out += fmt::format(", memory_kind={}", memory_kind_name(memory_kind_));
  if (uneven_) out += ", uneven=True";
  return out + ")";
}

Topology default_topology(std::span<const NamedSharding> shardings, int num_processes) {
  DeviceId largest = 0;
  for (const NamedSharding& sharding : shardings) {
    for (const DeviceId device : sharding.mesh().devices()) largest = std::max(largest, device);
  }
  const int64_t devices = checked_add(largest, int64_t{1}, "device count");
  if (num_processes > 0 && devices % num_processes != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("no default topology: {} devices (0..{}, as the meshes name them) do not split evenly "
                            "over {} processes; give a topology",
                            devices, largest, num_processes));
  }
  return Topology::uniform(devices, num_processes);
}

}  // namespace reshard
