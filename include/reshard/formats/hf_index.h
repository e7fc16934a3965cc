// model.safetensors.index.json: which file of a Hugging Face folder holds each tensor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace reshard {

// The file names transformers uses for a folder's weights.
inline constexpr std::string_view kHfSingleFileName = "model.safetensors";
inline constexpr std::string_view kHfIndexFileName = "model.safetensors.index.json";

// A parsed index. Only `weight_map` decides anything when reading; the totals
// are informational (transformers never checks them on load).
struct HfIndex {
  std::map<std::string, std::string> weight_map;  // tensor name -> file name, sorted by name
  std::optional<uint64_t> total_size;             // metadata.total_size, if an unsigned integer
  std::optional<uint64_t> total_parameters;       // metadata.total_parameters, likewise

  // The distinct file names the map refers to, sorted.
  std::vector<std::string> file_names() const;
};

// Parses and validates an index's bytes: a JSON object whose "weight_map" maps
// strings to safe file names, and whose optional "metadata" is an object.
// Throws Error(kInvalidIndex) naming `label` (the index's path) and, where there
// is one, the tensor.
HfIndex parse_hf_index(std::string_view bytes, std::string_view label);

// Refuses (Error kInvalidIndex) a weight_map file name that is empty, "." or
// contains "..", a path separator or NUL: the index may only name files that sit
// in its own folder.
void check_shard_file_name(std::string_view file_name, std::string_view tensor,
                           std::string_view label);

// The index as transformers writes it: json.dumps(index, indent=2,
// sort_keys=True) + "\n", so keys sorted, two-space indent, ASCII only (\uXXXX
// escapes). Metadata holds the totals that are set.
std::string hf_index_json(const HfIndex& index);

}  // namespace reshard
