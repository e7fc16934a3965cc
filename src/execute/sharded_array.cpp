#include "reshard/execute/sharded_array.h"

#include <fmt/format.h>

#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard {

using layout_detail::checked_mul;
using layout_detail::checked_product;

namespace {

uint64_t shard_bytes(const Box& box, size_t element_bytes) {
  return checked_mul(static_cast<uint64_t>(box.volume()), element_bytes, "shard size in bytes");
}

void check_shards(const std::vector<std::pair<DeviceId, Box>>& expected, const std::vector<Shard>& shards,
                  size_t element_bytes, int process) {
  if (shards.size() != expected.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("process {} owns {} devices of the mesh but {} shards were given", process,
                            expected.size(), shards.size()));
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    const auto& [device, box] = expected[i];
    const Shard& shard = shards[i];
    if (shard.device != device || shard.box != box) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("shard {} should be device {} holding {}, not device {} holding {}", i, device,
                              box.to_string(), shard.device, shard.box.to_string()));
    }
    if (shard.buffer.size() != shard_bytes(box, element_bytes)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("shard of device {} holds {} bytes, its slice {} needs {}", device,
                              shard.buffer.size(), box.to_string(), shard_bytes(box, element_bytes)));
    }
  }
}

// Calls `visit(index, element_number)` for every index of `box` in row-major order.
void for_each_index(const Box& box, const std::function<void(std::span<const int64_t>, int64_t)>& visit) {
  if (box.empty()) return;
  std::vector<int64_t> index = box.origin();
  const int64_t count = box.volume();
  for (int64_t n = 0; n < count; ++n) {
    visit(index, n);
    for (size_t d = box.rank(); d-- > 0;) {
      if (++index[d] < box.interval(d).end) break;
      index[d] = box.origin()[d];
    }
  }
}

}  // namespace

size_t whole_element_bytes(DType dtype) {
  const int bits = dtype_bits(dtype);
  if (bits % 8 != 0) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("dtype {} has {}-bit elements; sharded arrays need whole-byte elements",
                            dtype_name(dtype), bits));
  }
  return static_cast<size_t>(bits / 8);
}

ShardedArray::ShardedArray(Shape shape, DType dtype, NamedSharding sharding, Topology topology, int process,
                           std::vector<Shard> shards)
    : shape_(std::move(shape)),
      dtype_(dtype),
      sharding_(std::move(sharding)),
      topology_(std::move(topology)),
      process_(process),
      element_bytes_(whole_element_bytes(dtype)),
      shards_(std::move(shards)) {
  if (process_ < 0 || process_ >= topology_.num_processes()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("process {} is not in a topology of {} processes", process_,
                            topology_.num_processes()));
  }
  checked_product(shape_, "array element count");
  check_shards(sharding_.addressable_index_map(shape_, topology_, process_), shards_, element_bytes_, process_);
}

ShardedArray ShardedArray::allocate(Shape shape, DType dtype, NamedSharding sharding, Topology topology,
                                    int process) {
  const size_t element_bytes = whole_element_bytes(dtype);
  std::vector<Shard> shards;
  for (auto& [device, box] : sharding.addressable_index_map(shape, topology, process)) {
    Buffer buffer = Buffer::allocate(shard_bytes(box, element_bytes));
    shards.push_back(Shard{device, std::move(box), std::move(buffer)});
  }
  return ShardedArray(std::move(shape), dtype, std::move(sharding), std::move(topology), process,
                      std::move(shards));
}

ShardedArray ShardedArray::from_function(Shape shape, DType dtype, NamedSharding sharding, Topology topology,
                                         int process, const ElementFunction& element) {
  ShardedArray array = allocate(std::move(shape), dtype, std::move(sharding), std::move(topology), process);
  const size_t width = array.element_bytes();
  for (Shard& shard : array.shards_) {
    std::byte* data = shard.buffer.data();
    for_each_index(shard.box, [&](std::span<const int64_t> index, int64_t n) {
      element(index, std::span<std::byte>(data + static_cast<size_t>(n) * width, width));
    });
  }
  return array;
}

const Shard& ShardedArray::shard(DeviceId device) const {
  for (const Shard& s : shards_) {
    if (s.device == device) return s;
  }
  throw Error(ErrorCode::kUnknownDevice,
              fmt::format("process {} holds no shard for device {} (sharding {})", process_, device,
                          sharding_.to_string()));
}

ShardedArray ShardedArray::read_only_alias() const {
  ShardedArray alias = *this;
  for (Shard& shard : alias.shards_) {
    shard.buffer = Buffer::adopt_read_only(std::as_const(shard.buffer).bytes(), shard.buffer.owner());
  }
  return alias;
}

std::span<std::byte> ShardedArray::writable_bytes(size_t index) {
  if (index >= shards_.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("shard {}: process {} holds {} shards", index, process_, shards_.size()));
  }
  return shards_[index].buffer.bytes();
}

std::span<std::byte> ShardedArray::writable_bytes_of(DeviceId device) {
  return const_cast<Shard&>(static_cast<const ShardedArray&>(*this).shard(device)).buffer.bytes();
}

std::span<const std::byte> ShardedArray::element(DeviceId device, std::span<const int64_t> global_index) const {
  const Shard& s = shard(device);
  const Box point(std::vector<int64_t>(global_index.begin(), global_index.end()),
                  Shape(global_index.size(), 1));
  if (!s.box.contains(point)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("index {} is outside device {}'s slice {}", point.to_string(), device,
                            s.box.to_string()));
  }
  const std::vector<int64_t> strides = row_major_strides(s.box.shape());
  size_t offset = 0;
  for (size_t d = 0; d < strides.size(); ++d) {
    offset += static_cast<size_t>((global_index[d] - s.box.origin()[d]) * strides[d]);
  }
  return s.buffer.bytes().subspan(offset * element_bytes_, element_bytes_);
}

void ShardedArray::check_writable() const {
  for (const Shard& s : shards_) {
    if (!s.buffer.writable()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("process {}: the shard of device {} is read-only and cannot be a destination",
                              process_, s.device));
    }
  }
}

ShardedArray ShardedArray::in_topology(Topology topology) const {
  return ShardedArray(shape_, dtype_, sharding_, std::move(topology), process_, shards_);
}

}  // namespace reshard
