#include "execute/support/reference_arrays.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace reshard::testing {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

int64_t linear_index(const Shape& shape, std::span<const int64_t> index) {
  int64_t linear = 0;
  for (size_t d = 0; d < shape.size(); ++d) linear = linear * shape[d] + index[d];
  return linear;
}

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// Random axes (names "x", "y", "z") whose sizes multiply to at most `devices`.
std::vector<MeshAxis> random_axes(std::mt19937_64& rng, int64_t devices) {
  while (true) {
    std::vector<MeshAxis> axes;
    int64_t product = 1;
    const int64_t count = uniform(rng, 1, 3);
    for (int64_t a = 0; a < count; ++a) {
      axes.push_back(MeshAxis{std::string(1, static_cast<char>('x' + a)), uniform(rng, 1, 4)});
      product *= axes.back().size;
    }
    if (product <= devices) return axes;
  }
}

// Some unused axes for one dimension, in random order; {} for None.
SpecEntry random_entry(std::mt19937_64& rng, const Mesh& mesh, std::vector<bool>& used, int64_t dim, bool uneven) {
  if (uniform(rng, 0, 2) == 0) return {};
  std::vector<size_t> free_axes;
  for (size_t a = 0; a < mesh.num_axes(); ++a) {
    if (!used[a]) free_axes.push_back(a);
  }
  std::shuffle(free_axes.begin(), free_axes.end(), rng);
  free_axes.resize(std::min<size_t>(free_axes.size(), static_cast<size_t>(uniform(rng, 1, 2))));
  int64_t chunks = 1;
  for (size_t a : free_axes) chunks *= mesh.axis_size(a);
  if (!uneven && dim % chunks != 0) return {};
  SpecEntry entry;
  for (size_t a : free_axes) {
    used[a] = true;
    entry.push_back(mesh.axes()[a].name);
  }
  return entry;
}

}  // namespace

void reference_element(const Shape& shape, uint64_t salt, std::span<const int64_t> index, std::span<std::byte> out) {
  uint64_t value = splitmix(static_cast<uint64_t>(linear_index(shape, index)) ^ splitmix(salt));
  for (size_t i = 0; i < out.size(); ++i) {
    if (i % 8 == 0 && i > 0) value = splitmix(value);
    out[i] = static_cast<std::byte>((value >> (8 * (i % 8))) & 0xff);
  }
}

ElementFunction reference_elements(const Shape& shape, uint64_t salt) {
  return [shape, salt](std::span<const int64_t> index, std::span<std::byte> out) {
    reference_element(shape, salt, index, out);
  };
}

std::vector<std::byte> reference_host_bytes(const Shape& shape, DType dtype, uint64_t salt) {
  const size_t width = whole_element_bytes(dtype);
  const Box whole = Box::whole(shape);
  std::vector<std::byte> out(static_cast<size_t>(whole.volume()) * width);
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t n = 0; n < out.size() / width; ++n) {
    reference_element(shape, salt, index, std::span<std::byte>(out.data() + n * width, width));
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

ShardedArray reference_array(const Shape& shape, DType dtype, const NamedSharding& sharding,
                             const Topology& topology, int process, uint64_t salt) {
  return ShardedArray::from_function(shape, dtype, sharding, topology, process, reference_elements(shape, salt));
}

::testing::AssertionResult matches_reference(const ShardedArray& array, uint64_t salt) {
  const size_t width = array.element_bytes();
  std::vector<std::byte> expected(width);
  for (const Shard& shard : array.shards()) {
    if (shard.box.empty()) continue;
    std::vector<int64_t> index = shard.box.origin();
    for (size_t n = 0; n < static_cast<size_t>(shard.box.volume()); ++n) {
      reference_element(array.shape(), salt, index, expected);
      if (std::memcmp(shard.buffer.data() + n * width, expected.data(), width) != 0) {
        return ::testing::AssertionFailure()
               << fmt::format("process {} device {}: element [{}] of slice {} is wrong", array.process(),
                              shard.device, fmt::join(index, ", "), shard.box.to_string());
      }
      for (size_t d = index.size(); d-- > 0;) {
        if (++index[d] < shard.box.interval(d).end) break;
        index[d] = shard.box.origin()[d];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

NamedSharding random_sharding(std::mt19937_64& rng, const Shape& shape, const Topology& topology, bool uneven) {
  std::vector<MeshAxis> axes = random_axes(rng, topology.num_devices());
  int64_t size = 1;
  for (const MeshAxis& a : axes) size *= a.size;
  std::vector<DeviceId> devices(static_cast<size_t>(topology.num_devices()));
  std::iota(devices.begin(), devices.end(), 0);
  std::shuffle(devices.begin(), devices.end(), rng);
  devices.resize(static_cast<size_t>(size));
  const Mesh mesh(std::move(axes), std::move(devices));
  std::vector<bool> used(mesh.num_axes(), false);
  std::vector<SpecEntry> entries;
  for (int64_t dim : shape) entries.push_back(random_entry(rng, mesh, used, dim, uneven));
  return NamedSharding(mesh, PartitionSpec(std::move(entries)), MemoryKind::kDevice, uneven);
}

Shape random_shape(std::mt19937_64& rng, bool uneven) {
  static const std::vector<int64_t> kEvenSizes = {1, 2, 4, 6, 8, 12, 16, 24};
  Shape shape(static_cast<size_t>(uniform(rng, 1, 3)));
  for (int64_t& dim : shape) dim = uneven ? uniform(rng, 1, 13) : pick(rng, kEvenSizes);
  return shape;
}

}  // namespace reshard::testing
