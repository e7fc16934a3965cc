// Random tensor sets for safetensors property tests: every dtype, scalars,
// zero-size dimensions, names with unicode, quotes and control characters.
#pragma once

#include <cstddef>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "reshard/formats/safetensors_layout.h"
#include "reshard/formats/safetensors_writer.h"

namespace reshard::testing {

struct RandomTensor {
  safetensors::TensorSpec spec;
  std::vector<std::byte> bytes;
};

// A name mixing ASCII, multi-byte UTF-8, quotes, backslashes, slashes and control bytes.
std::string random_tensor_name(std::mt19937_64& rng);

// A shape of rank 0-4 (dimensions 0-5) whose `dtype` elements fill whole bytes.
Shape random_shape(std::mt19937_64& rng, DType dtype);

// Up to `max_tensors` tensors with distinct names and random contents.
std::vector<RandomTensor> random_tensors(std::mt19937_64& rng, size_t max_tensors);

// nullopt, the default {"format": "pt"}, or random string pairs.
std::optional<safetensors::Metadata> random_metadata(std::mt19937_64& rng);

// Views of the tensors for write_file.
std::vector<safetensors::TensorData> as_tensor_data(const std::vector<RandomTensor>& tensors);

}  // namespace reshard::testing
