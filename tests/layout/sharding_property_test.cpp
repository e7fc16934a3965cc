// Randomized invariants of NamedSharding against a reference written straight
// from JAX's formulas for NamedSharding's index map (it never calls tiling()).
#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "layout/checked.h"
#include "layout/support/printers.h"
#include "reshard/layout/sharding.h"
#include "support/seed.h"

namespace reshard {

using layout_detail::checked_add;
using layout_detail::checked_mul;

namespace {

constexpr int64_t kMaxMeshDevices = 4096;

struct RandomCase {
  std::vector<MeshAxis> axes;
  std::vector<DeviceId> devices;
  std::vector<SpecEntry> spec;
  Shape shape;
  bool uneven = false;

  std::string describe() const {
    std::ostringstream out;
    out << "mesh";
    for (const MeshAxis& a : axes) out << " " << a.name << "=" << a.size;
    out << " spec " << PartitionSpec(spec).to_string() << " shape (";
    for (int64_t s : shape) out << s << ",";
    out << ")" << (uneven ? " uneven" : "") << " devices " << devices.size();
    return out.str();
  }
};

int64_t axis_size(const RandomCase& c, const std::string& name) {
  for (const MeshAxis& a : c.axes) {
    if (a.name == name) return a.size;
  }
  ADD_FAILURE() << "no axis " << name;
  return 1;
}

// n_k: the product of the sizes of the axes entry k names (1 for None or past the spec).
int64_t partitions(const RandomCase& c, size_t dim) {
  int64_t n = 1;
  if (dim < c.spec.size()) {
    for (const std::string& axis : c.spec[dim]) n *= axis_size(c, axis);
  }
  return n;
}

RandomCase random_case(std::mt19937_64& rng, bool large_shape) {
  RandomCase c;
  const size_t num_axes = 1 + rng() % 4;
  static constexpr int64_t kSizes[] = {1, 2, 2, 3, 4, 4, 5, 8, 16, 32};
  int64_t devices = 1;
  for (size_t a = 0; a < num_axes; ++a) {
    int64_t size = kSizes[rng() % std::size(kSizes)];
    while (devices * size > kMaxMeshDevices) size /= 2;
    size = std::max<int64_t>(size, 1);
    devices *= size;
    c.axes.push_back({fmt::format("a{}", a), size});
  }
  // Now and then a mesh as large as allowed: 4096 = 16 * 16 * 16 or 8^4.
  if (rng() % 10 == 0) {
    c.axes.assign({{"a0", 16}, {"a1", 16}, {"a2", 16}});
    if (rng() % 2 == 0) c.axes.assign({{"a0", 8}, {"a1", 8}, {"a2", 8}, {"a3", 8}});
    devices = 4096;
  }
  // Distinct ids in a random order, sometimes with gaps.
  std::vector<DeviceId> pool(static_cast<size_t>(rng() % 2 == 0 ? devices : 2 * devices));
  std::iota(pool.begin(), pool.end(), DeviceId{0});
  std::shuffle(pool.begin(), pool.end(), rng);
  c.devices.assign(pool.begin(), pool.begin() + devices);

  const size_t rank = rng() % 10 == 0 ? 0 : 1 + rng() % 4;
  // Each axis goes to a random dimension, or to none (a replication axis).
  std::vector<SpecEntry> entries(rank);
  std::vector<size_t> order(c.axes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), rng);  // the order inside a tuple is random too
  for (size_t a : order) {
    if (rank == 0 || rng() % 4 == 0) continue;
    entries[rng() % rank].push_back(c.axes[a].name);
  }
  size_t used = rank;
  while (used > 0 && entries[used - 1].empty()) --used;
  c.spec.assign(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(used + rng() % (rank - used + 1)));

  c.uneven = rng() % 2 == 0;
  int64_t volume = 1;  // kept under about 2^40 elements so every size fits
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = partitions(c, d);
    int64_t multiple = large_shape ? int64_t(1 + rng() % 3000) : int64_t(rng() % 8 == 0 ? 0 : 1 + rng() % 3);
    multiple = std::min(multiple, std::max<int64_t>(((int64_t{1} << 40) / volume) / n, 1));
    int64_t size = n * multiple;
    if (c.uneven) size = std::max<int64_t>(0, size + static_cast<int64_t>(rng() % 7) - 3);
    c.shape.push_back(size);
    volume *= std::max<int64_t>(size, 1);
  }
  return c;
}

// The slice and replica id of every logical device, from the formulas.
struct Reference {
  std::vector<std::vector<int64_t>> coordinates;
  std::vector<Box> boxes;
  std::vector<int64_t> replicas;
};

Reference reference(const RandomCase& c) {
  Reference ref;
  for (size_t logical = 0; logical < c.devices.size(); ++logical) {
    std::vector<int64_t> coord(c.axes.size());
    int64_t rest = static_cast<int64_t>(logical);
    for (size_t a = c.axes.size(); a-- > 0;) {  // row-major: the last axis changes fastest
      coord[a] = rest % c.axes[a].size;
      rest /= c.axes[a].size;
    }
    std::vector<Interval> slice;
    for (size_t d = 0; d < c.shape.size(); ++d) {
      const int64_t n = partitions(c, d);
      int64_t chunk = 0;  // mixed radix, first axis most significant
      if (d < c.spec.size()) {
        for (const std::string& axis : c.spec[d]) {
          const size_t a = static_cast<size_t>(std::stoi(axis.substr(1)));
          chunk = chunk * c.axes[a].size + coord[a];
        }
      }
      const int64_t size = c.shape[d];
      if (c.uneven) {
        const int64_t tile = (size + n - 1) / n;
        slice.push_back({std::min(chunk * tile, size), std::min((chunk + 1) * tile, size)});
      } else {
        slice.push_back({chunk * size / n, (chunk + 1) * size / n});
      }
    }
    ref.coordinates.push_back(coord);
    ref.boxes.push_back(Box::from_intervals(slice));
  }
  std::map<std::vector<int64_t>, int64_t> seen;  // origin then shape
  for (const Box& box : ref.boxes) {
    std::vector<int64_t> key = box.origin();
    key.insert(key.end(), box.shape().begin(), box.shape().end());
    ref.replicas.push_back(seen[key]++);
  }
  return ref;
}

// How many devices hold each element, by walking every box (small shapes only).
void check_every_element(const std::vector<Box>& boxes, const Shape& shape, int64_t copies) {
  const int64_t volume = Box::whole(shape).volume();
  std::vector<int64_t> holders(static_cast<size_t>(volume), 0);
  const Box whole = Box::whole(shape);
  for (const Box& box : boxes) {
    for (const reshard::Run& run : contiguous_runs(whole, box)) {
      for (int64_t i = run.offset; i < run.offset + run.length; ++i) ++holders[static_cast<size_t>(i)];
    }
  }
  for (int64_t i = 0; i < volume; ++i) {
    ASSERT_EQ(holders[static_cast<size_t>(i)], copies) << "element " << i;
  }
}

// On large shapes: volumes add up, and sampled elements have the right holder count.
void check_coverage_arithmetic(std::mt19937_64& rng, const std::vector<Box>& boxes, const Shape& shape,
                               int64_t copies) {
  int64_t held = 0;
  for (const Box& box : boxes) held = checked_add(held, box.volume(), "test volume");
  ASSERT_EQ(held, checked_mul(copies, Box::whole(shape).volume(), "test volume"));
  if (Box::whole(shape).empty()) return;
  for (int sample = 0; sample < 16; ++sample) {
    std::vector<int64_t> index;
    for (int64_t s : shape) index.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(s)));
    int64_t holders = 0;
    for (const Box& box : boxes) holders += box.contains(Box(index, Shape(shape.size(), 1))) ? 1 : 0;
    ASSERT_EQ(holders, copies);
  }
}

void check_case(std::mt19937_64& rng, const RandomCase& c) {
  SCOPED_TRACE(c.describe());
  const NamedSharding sharding(Mesh(c.axes, c.devices), PartitionSpec(c.spec), MemoryKind::kDevice, c.uneven);
  const Reference ref = reference(c);
  const std::vector<Box> boxes = sharding.index_domains(c.shape);
  ASSERT_EQ(boxes, ref.boxes);
  ASSERT_EQ(sharding.replica_ids(c.shape), ref.replicas);

  int64_t chunks = 1;
  Shape shard(c.shape.size());
  for (size_t d = 0; d < c.shape.size(); ++d) {
    chunks *= partitions(c, d);
    shard[d] = c.shape[d] / partitions(c, d);
  }
  if (c.uneven) {
    EXPECT_FALSE(sharding.shard_shape(c.shape).has_value());
  } else {
    EXPECT_EQ(sharding.shard_shape(c.shape), shard);
  }
  EXPECT_EQ(sharding.is_fully_replicated(), chunks == 1);

  // Every element is held by (devices / distinct slices) devices.
  const auto devices = static_cast<int64_t>(c.devices.size());
  ASSERT_EQ(devices % chunks, 0);
  const int64_t copies = devices / chunks;
  if (!c.uneven && !Box::whole(c.shape).empty()) {
    std::set<std::pair<std::vector<int64_t>, Shape>> distinct;
    for (const Box& b : boxes) distinct.insert({b.origin(), b.shape()});
    EXPECT_EQ(static_cast<int64_t>(distinct.size()), chunks);
  }
  const int64_t volume = Box::whole(c.shape).volume();
  if (volume <= 4096 && volume * devices <= (int64_t{1} << 21)) {
    check_every_element(boxes, c.shape, copies);
  } else {
    check_coverage_arithmetic(rng, boxes, c.shape, copies);
  }

  // Replicas agree: devices equal in every named axis hold the same slice.
  std::set<std::string> named;
  for (const SpecEntry& e : c.spec) named.insert(e.begin(), e.end());
  std::map<std::vector<int64_t>, std::vector<size_t>> groups;
  for (size_t logical = 0; logical < c.devices.size(); ++logical) {
    std::vector<int64_t> key;
    for (size_t a = 0; a < c.axes.size(); ++a) {
      if (named.count(c.axes[a].name)) key.push_back(ref.coordinates[logical][a]);
    }
    groups[key].push_back(logical);
  }
  for (const auto& [key, members] : groups) {
    ASSERT_EQ(static_cast<int64_t>(members.size()), copies);
    for (size_t m : members) ASSERT_EQ(boxes[m], boxes[members.front()]);
  }

  // Addressability under a random uniform topology.
  const DeviceId largest = *std::max_element(c.devices.begin(), c.devices.end());
  const int64_t t = (largest + 1) * (1 + static_cast<int64_t>(rng() % 2));
  std::vector<int> divisors;  // a few processes: each one costs a pass over the mesh
  for (int p = 1; p <= std::min<int64_t>(t, 32); ++p) {
    if (t % p == 0) divisors.push_back(p);
  }
  const int processes = divisors[rng() % divisors.size()];
  const Topology topology = Topology::uniform(t, processes);
  size_t total = 0;
  for (int p = 0; p < processes; ++p) {
    std::vector<std::pair<DeviceId, Box>> want;
    for (size_t logical = 0; logical < c.devices.size(); ++logical) {
      if (c.devices[logical] / (t / processes) == p) want.emplace_back(c.devices[logical], ref.boxes[logical]);
    }
    ASSERT_EQ(sharding.addressable_index_map(c.shape, topology, p), want) << "process " << p;
    EXPECT_EQ(sharding.is_fully_addressable(topology, p), want.size() == c.devices.size()) << "process " << p;
    total += want.size();
  }
  EXPECT_EQ(total, c.devices.size());
}

TEST(ShardingProperties, SmallShapesElementByElement) {
  std::mt19937_64 rng = testing::seeded_rng();
  for (int trial = 0; trial < 200; ++trial) {
    check_case(rng, random_case(rng, false));
    if (HasFatalFailure()) return;
  }
}

TEST(ShardingProperties, LargeShapesByCoverageArithmetic) {
  std::mt19937_64 rng = testing::seeded_rng();
  for (int trial = 0; trial < 100; ++trial) {
    check_case(rng, random_case(rng, true));
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace reshard
