#include "plan/support/layouts.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "reshard/layout/parse.h"

namespace reshard::testing {
namespace {

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

bool chance(std::mt19937_64& rng, double p) { return std::bernoulli_distribution(p)(rng); }

std::vector<MeshAxis> random_axes(std::mt19937_64& rng, int64_t max_devices) {
  static const char* const kNames[] = {"a", "b", "c", "d"};
  while (true) {
    std::vector<MeshAxis> axes;
    int64_t size = 1;
    const int64_t count = uniform(rng, 1, 4);
    for (int64_t i = 0; i < count; ++i) {
      axes.push_back({kNames[i], uniform(rng, 1, 4)});
      size *= axes.back().size;
    }
    if (size <= max_devices) return axes;
  }
}

// `count` distinct ids from `pool`, in random order.
std::vector<DeviceId> random_devices(std::mt19937_64& rng, std::vector<DeviceId> pool, int64_t count) {
  std::shuffle(pool.begin(), pool.end(), rng);
  pool.resize(static_cast<size_t>(count));
  return pool;
}

// Each axis splits a random dimension (in random order within it) or replicates.
PartitionSpec random_spec(std::mt19937_64& rng, const std::vector<MeshAxis>& axes, size_t rank) {
  std::vector<SpecEntry> entries(rank);
  std::vector<size_t> order(axes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t axis : order) {
    if (rank == 0 || chance(rng, 0.3)) continue;
    entries[static_cast<size_t>(uniform(rng, 0, static_cast<int64_t>(rank) - 1))].push_back(axes[axis].name);
  }
  while (!entries.empty() && entries.back().empty() && chance(rng, 0.5)) entries.pop_back();
  return PartitionSpec(std::move(entries));
}

NamedSharding random_sharding(std::mt19937_64& rng, int64_t num_devices, size_t rank, bool uneven,
                              const std::vector<DeviceId>& avoid) {
  std::vector<MeshAxis> axes = random_axes(rng, num_devices);
  const int64_t size = std::accumulate(axes.begin(), axes.end(), int64_t{1},
                                       [](int64_t p, const MeshAxis& a) { return p * a.size; });
  std::vector<DeviceId> all(static_cast<size_t>(num_devices));
  std::iota(all.begin(), all.end(), DeviceId{0});
  std::vector<DeviceId> others;
  std::copy_if(all.begin(), all.end(), std::back_inserter(others),
               [&](DeviceId d) { return std::find(avoid.begin(), avoid.end(), d) == avoid.end(); });
  std::vector<DeviceId> devices;
  if (static_cast<int64_t>(others.size()) >= size && chance(rng, 0.3)) {
    devices = random_devices(rng, others, size);  // disjoint from the other layout
  } else if (chance(rng, 0.25)) {
    devices.assign(all.begin(), all.begin() + size);
  } else {
    devices = random_devices(rng, all, size);
  }
  PartitionSpec spec = random_spec(rng, axes, rank);
  const MemoryKind kind = chance(rng, 0.5) ? MemoryKind::kDevice : MemoryKind::kPinnedHost;
  return NamedSharding(Mesh(std::move(axes), std::move(devices)), std::move(spec), kind, uneven);
}

Shape random_shape(std::mt19937_64& rng, const NamedSharding& src, const NamedSharding& dst, size_t rank,
                   bool uneven) {
  Shape shape(rank);
  if (uneven) {
    for (int64_t& extent : shape) extent = chance(rng, 0.05) ? 0 : uniform(rng, 1, 9);
    return shape;
  }
  const std::vector<int64_t> src_chunks = src.num_chunks(rank);
  const std::vector<int64_t> dst_chunks = dst.num_chunks(rank);
  int64_t elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    shape[d] = std::lcm(src_chunks[d], dst_chunks[d]);
    elements *= shape[d];
  }
  for (size_t d = 0; d < rank; ++d) {
    if (elements < 300) {
      const int64_t factor = uniform(rng, 1, 3);
      shape[d] *= factor;
      elements *= factor;
    }
  }
  return shape;
}

}  // namespace

NamedSharding sharding(const std::string& mesh, const std::vector<DeviceId>& devices, const std::string& spec,
                       bool uneven, MemoryKind kind) {
  std::vector<MeshAxis> axes = parse_mesh_axes(mesh);
  Mesh m = devices.empty() ? Mesh::with_default_order(std::move(axes)) : Mesh(std::move(axes), devices);
  return NamedSharding(std::move(m), PartitionSpec::parse(spec), kind, uneven);
}

PlanKey random_plan_key(std::mt19937_64& rng) {
  static const int64_t kDeviceCounts[] = {1, 2, 4, 6, 8, 12, 16};
  static const DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kI8, DType::kF64};
  const int64_t num_devices = kDeviceCounts[uniform(rng, 0, std::ssize(kDeviceCounts) - 1)];
  std::vector<int> divisors;
  for (int p = 1; p <= num_devices; ++p) {
    if (num_devices % p == 0) divisors.push_back(p);
  }
  const int processes = divisors[static_cast<size_t>(uniform(rng, 0, std::ssize(divisors) - 1))];
  const size_t rank = static_cast<size_t>(uniform(rng, 0, 10) == 0 ? 0 : uniform(rng, 1, 3));
  const bool uneven = chance(rng, 0.4);
  NamedSharding src = random_sharding(rng, num_devices, rank, uneven, {});
  NamedSharding dst = random_sharding(rng, num_devices, rank, uneven, src.mesh().devices());
  Shape shape = random_shape(rng, src, dst, rank, uneven);
  const DType dtype = kDTypes[uniform(rng, 0, std::ssize(kDTypes) - 1)];
  return PlanKey{std::move(shape), dtype, std::move(src), std::move(dst), Topology::uniform(num_devices, processes)};
}

PlanKey random_fan_out_key(std::mt19937_64& rng) {
  static const int64_t kPerProcess[] = {2, 3, 4};
  const int processes = static_cast<int>(uniform(rng, 1, 4));
  const int64_t per_process = kPerProcess[uniform(rng, 0, 2)];
  const int64_t num_devices = processes * per_process;
  const size_t rank = static_cast<size_t>(uniform(rng, 0, 3));
  const bool uneven = chance(rng, 0.4);
  // Target: mesh (process, device) in id order; the spec names `process` (or
  // nothing), never `device`, so each process's devices share their slice.
  std::vector<DeviceId> ids(static_cast<size_t>(num_devices));
  std::iota(ids.begin(), ids.end(), DeviceId{0});
  std::vector<SpecEntry> entries(rank);
  if (rank > 0 && chance(rng, 0.7)) entries[static_cast<size_t>(uniform(rng, 0, static_cast<int64_t>(rank) - 1))] = {"process"};
  NamedSharding dst(Mesh({{"process", processes}, {"device", per_process}}, std::move(ids)), PartitionSpec(entries),
                    MemoryKind::kDevice, uneven);
  NamedSharding src = random_sharding(rng, num_devices, rank, uneven, {});
  Shape shape = random_shape(rng, src, dst, rank, uneven);
  return PlanKey{std::move(shape), DType::kF32, std::move(src), std::move(dst),
                 Topology::uniform(num_devices, processes)};
}

PlanKey random_shared_source_key(std::mt19937_64& rng) {
  const int holders = static_cast<int>(uniform(rng, 2, 4));
  const int takers = static_cast<int>(uniform(rng, 1, 3));
  const int64_t per_process = uniform(rng, 1, 2);
  const int processes = holders + takers;
  const int64_t num_devices = processes * per_process;
  const size_t rank = static_cast<size_t>(uniform(rng, 1, 3));
  // Source: the same random split on every holder process (a `copy` axis
  // over processes, replicated); target: a random layout on the others.
  const int64_t split = uniform(rng, 1, per_process);
  std::vector<DeviceId> src_ids;
  for (int p = 0; p < holders; ++p) {
    for (int64_t d = 0; d < split; ++d) src_ids.push_back(p * per_process + d);
  }
  std::vector<SpecEntry> src_entries(rank);
  src_entries[static_cast<size_t>(uniform(rng, 0, static_cast<int64_t>(rank) - 1))] = {"part"};
  NamedSharding src(Mesh({{"copy", holders}, {"part", split}}, std::move(src_ids)), PartitionSpec(src_entries));
  std::vector<DeviceId> others;
  for (DeviceId d = holders * per_process; d < num_devices; ++d) others.push_back(d);
  std::vector<MeshAxis> axes = random_axes(rng, static_cast<int64_t>(others.size()));
  int64_t size = 1;
  for (const MeshAxis& a : axes) size *= a.size;
  NamedSharding dst(Mesh(axes, random_devices(rng, others, size)), random_spec(rng, axes, rank));
  Shape shape = random_shape(rng, src, dst, rank, false);
  return PlanKey{std::move(shape), DType::kI32, std::move(src), std::move(dst),
                 Topology::uniform(num_devices, processes)};
}

std::string describe(const PlanKey& key) {
  return fmt::format("{}[{}]: {} -> {}, {} devices / {} processes", dtype_name(key.dtype), fmt::join(key.shape, ", "),
                     key.src.to_string(), key.dst.to_string(), key.topology.num_devices(),
                     key.topology.num_processes());
}

}  // namespace reshard::testing
