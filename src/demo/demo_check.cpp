#include "demo/demo_check.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "reshard/layout/error.h"

namespace reshard::demo {
namespace {

static_assert(std::endian::native == std::endian::little, "stored tensors are little-endian, as this host");

uint32_t load_bits(const std::byte* element, size_t element_bytes) {
  uint32_t bits = 0;
  std::memcpy(&bits, element, element_bytes);
  return bits;
}

std::string hex(uint32_t bits, size_t element_bytes) { return fmt::format("0x{:0{}x}", bits, element_bytes * 2); }

// The multi-dimensional index of row-major position `flat` in `shape`.
std::vector<int64_t> index_of(uint64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    const auto n = static_cast<uint64_t>(shape[d]);
    index[d] = static_cast<int64_t>(flat % n);
    flat /= n;
  }
  return index;
}

std::vector<uint64_t> strides_of(const Shape& shape) {
  std::vector<uint64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * static_cast<uint64_t>(shape[d]);
  return strides;
}

// Every element of `box` in row-major order: its global row-major position.
template <typename Visit>
void for_each_position(const Box& box, const Shape& global, Visit&& visit) {
  const std::vector<uint64_t> strides = strides_of(global);
  const size_t rank = box.rank();
  if (box.empty()) return;
  std::vector<int64_t> i(rank, 0);
  uint64_t count = 0;
  while (true) {
    uint64_t flat = 0;
    for (size_t d = 0; d < rank; ++d) flat += static_cast<uint64_t>(box.origin()[d] + i[d]) * strides[d];
    visit(count++, flat);
    size_t d = rank;
    while (d > 0) {
      --d;
      if (++i[d] < box.shape()[d]) break;
      i[d] = 0;
      if (d == 0) return;
    }
    if (rank == 0) return;
  }
}

}  // namespace

void CheckTally::add(const CheckTally& other) {
  tensors += other.tensors;
  elements += other.elements;
  bytes += other.bytes;
  if (mismatches == 0 && other.mismatches > 0) first = other.first;
  mismatches += other.mismatches;
}

void check_shards(std::string_view name, const ShardedArray& array, const ExpectedBits& expected, CheckTally& tally) {
  const size_t element_bytes = array.element_bytes();
  ++tally.tensors;
  for (const Shard& shard : array.shards()) {
    const std::byte* data = shard.buffer.data();
    for_each_position(shard.box, array.shape(), [&](uint64_t at, uint64_t flat) {
      const uint32_t got = load_bits(data + at * element_bytes, element_bytes);
      const uint32_t want = expected(flat);
      if (got != want) {
        tally.fail([&] {
          return fmt::format("tensor {} element [{}] on device {} is {} where the reference computes {}", name,
                             fmt::join(index_of(flat, array.shape()), ", "), shard.device, hex(got, element_bytes),
                             hex(want, element_bytes));
        });
      }
    });
    const uint64_t n = static_cast<uint64_t>(shard.buffer.size()) / element_bytes;
    tally.elements += n;
    tally.bytes += shard.buffer.size();
  }
}

void check_stored(std::string_view name, DType dtype, const Shape& shape, std::string_view stored_dtype,
                  const std::vector<int64_t>& stored_shape, std::string_view bytes, const ExpectedBits& expected,
                  CheckTally& tally) {
  ++tally.tensors;
  if (stored_dtype != dtype_name(dtype) || stored_shape != shape) {
    tally.fail([&] {
      return fmt::format("tensor {} is stored as {} [{}] where the reference is {} [{}]", name, stored_dtype,
                         fmt::join(stored_shape, ", "), dtype_name(dtype), fmt::join(shape, ", "));
    });
    return;
  }
  const size_t element_bytes = reshard::element_bytes(dtype);
  uint64_t elements = 1;
  for (const int64_t d : shape) elements *= static_cast<uint64_t>(d);
  if (bytes.size() != elements * element_bytes) {
    tally.fail([&] {
      return fmt::format("tensor {} has {} bytes where its shape needs {}", name, bytes.size(),
                         elements * element_bytes);
    });
    return;
  }
  const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
  for (uint64_t flat = 0; flat < elements; ++flat) {
    const uint32_t got = load_bits(data + flat * element_bytes, element_bytes);
    const uint32_t want = expected(flat);
    if (got != want) {
      tally.fail([&] {
        return fmt::format("tensor {} element [{}] is {} where the reference computes {}", name,
                           fmt::join(index_of(flat, shape), ", "), hex(got, element_bytes), hex(want, element_bytes));
      });
    }
  }
  tally.elements += elements;
  tally.bytes += bytes.size();
}

CheckTally agree_on_check(const CheckTally& local, Transport& transport, std::string_view what) {
  const nlohmann::json mine = {{"tensors", local.tensors},
                               {"elements", local.elements},
                               {"bytes", local.bytes},
                               {"mismatches", local.mismatches},
                               {"first", local.first}};
  const std::string text = mine.dump();
  const auto gathered = transport.all_gather(std::as_bytes(std::span(text.data(), text.size())));
  CheckTally total;
  for (const std::vector<std::byte>& bytes : gathered) {
    const auto json = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    CheckTally part;
    part.tensors = json["tensors"].get<uint64_t>();
    part.elements = json["elements"].get<uint64_t>();
    part.bytes = json["bytes"].get<uint64_t>();
    part.mismatches = json["mismatches"].get<uint64_t>();
    part.first = json["first"].get<std::string>();
    total.add(part);
  }
  if (total.mismatches > 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("check failed: {}: {} difference{} from the reference in {} elements; first: {}", what,
                            total.mismatches, total.mismatches == 1 ? "" : "s", total.elements, total.first));
  }
  return total;
}

}  // namespace reshard::demo
