// A sharded array with the name it is saved and restored under.
#pragma once

#include <optional>
#include <string>

#include "reshard/execute/sharded_array.h"
#include "reshard/formats/safetensors_header.h"

namespace reshard {

// One entry of a model or optimizer state: its name, this process's part of
// the array, and optional user metadata (string to string) kept with it.
struct NamedArray {
  std::string name;
  ShardedArray array;
  std::optional<safetensors::Metadata> metadata = std::nullopt;
};

}  // namespace reshard
