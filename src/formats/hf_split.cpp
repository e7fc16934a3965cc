#include "reshard/formats/hf_split.h"

#include <fmt/format.h>

namespace reshard {

std::vector<std::vector<size_t>> split_into_shards(std::span<const uint64_t> tensor_bytes,
                                                   uint64_t max_shard_size) {
  std::vector<std::vector<size_t>> files;
  std::vector<size_t> current;
  uint64_t current_bytes = 0;
  for (size_t i = 0; i < tensor_bytes.size(); ++i) {
    const uint64_t bytes = tensor_bytes[i];
    if (bytes > max_shard_size) {
      // As the reference: emitted at once, ahead of the file being filled.
      files.push_back({i});
      continue;
    }
    // current_bytes <= max_shard_size and bytes <= max_shard_size, so comparing
    // against the room left avoids overflowing the sum.
    if (bytes > max_shard_size - current_bytes) {
      files.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += bytes;
  }
  if (!current.empty()) files.push_back(std::move(current));
  return files;
}

std::string hf_shard_file_name(size_t index, size_t count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

}  // namespace reshard
