#include "formats/support/random_tensors.h"

#include <set>

#include "formats/support/safetensors_files.h"
#include "layout/checked.h"

namespace reshard::testing {

using layout_detail::checked_product;

namespace {

size_t pick(std::mt19937_64& rng, size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

}  // namespace

std::string random_tensor_name(std::mt19937_64& rng) {
  static const std::vector<std::string> kPieces = {
      "a", "b", "z", "model", ".", "_", "0", "9", "layers", "weight", "/", "\"", "\\", "\n",
      "\t", std::string(1, '\0'), "\x01", "\x1f", "\x7f", " ", "\xc3\xa9", "\xc3\xbc",
      "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "__metadata", "{", "}", ":", ","};
  std::string name;
  const size_t pieces = 1 + pick(rng, 6);
  for (size_t i = 0; i < pieces; ++i) name += kPieces[pick(rng, kPieces.size())];
  return name;
}

Shape random_shape(std::mt19937_64& rng, DType dtype) {
  while (true) {
    Shape shape(pick(rng, 5));
    int64_t elements = 1;
    for (int64_t& dim : shape) {
      dim = static_cast<int64_t>(pick(rng, 10) == 0 ? 0 : 1 + pick(rng, 5));
      elements *= dim;
    }
    if (elements * dtype_bits(dtype) % 8 == 0) return shape;
  }
}

std::vector<RandomTensor> random_tensors(std::mt19937_64& rng, size_t max_tensors) {
  std::vector<RandomTensor> tensors;
  std::set<std::string> names;
  const size_t count = pick(rng, max_tensors + 1);
  while (tensors.size() < count) {
    std::string name = random_tensor_name(rng);
    if (name == "__metadata__" || !names.insert(name).second) continue;
    const auto dtype = static_cast<DType>(pick(rng, kNumDTypes));
    Shape shape = random_shape(rng, dtype);
    const auto elements = static_cast<uint64_t>(checked_product(shape, "elements"));
    std::vector<std::byte> bytes = random_bytes(rng, dtype_byte_size(dtype, elements));
    tensors.push_back({{std::move(name), dtype, safetensors::dims_of(shape)}, std::move(bytes)});
  }
  return tensors;
}

std::optional<safetensors::Metadata> random_metadata(std::mt19937_64& rng) {
  switch (pick(rng, 3)) {
    case 0: return std::nullopt;
    case 1: return safetensors::default_metadata();
    default: {
      safetensors::Metadata metadata;
      std::set<std::string> keys;
      for (size_t i = pick(rng, 4); i > 0; --i) {
        std::string key = random_tensor_name(rng);
        if (keys.insert(key).second) metadata.emplace_back(std::move(key), random_tensor_name(rng));
      }
      return metadata;
    }
  }
}

std::vector<safetensors::TensorData> as_tensor_data(const std::vector<RandomTensor>& tensors) {
  std::vector<safetensors::TensorData> data;
  for (const RandomTensor& t : tensors) data.push_back({t.spec, t.bytes});
  return data;
}

}  // namespace reshard::testing
