// The map file: how a training framework's tensors become Hugging Face tensors
// (rename, unstack, merge or split axes, transpose, cast), and back.
// The format is described in docs/tensor-map.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/layout/dtype.h"

namespace reshard {

// One side of a rule's "rearrange" ("layer (heads head_dim) embed"): one entry
// per tensor dimension, each the axis names it is made of, most significant first.
using AxisGroups = std::vector<std::vector<std::string>>;

// Axis sizes by name, for axes that a tensor's shape alone does not give.
using AxisSizes = std::map<std::string, int64_t>;

// One rule: source tensors whose names match `from` become tensors named `to`.
struct TensorMapRule {
  std::string from;          // name pattern; {x} matches one dot-free part, {axis} of a stack axis digits
  std::string to;            // name template; {x} as captured, {axis} of an unstack axis its index
  bool rearranged = false;   // false: shapes pass through unchanged
  AxisGroups from_axes;      // the source's dimensions, each split into named axes
  AxisGroups to_axes;        // the output's dimensions, each merging named axes
  AxisSizes sizes;           // sizes of this rule's axes (beside the map's)
  std::optional<DType> dtype;  // cast floating tensors to this (F32, F16, BF16)
  bool optional = false;     // matching no tensor is not an error
  size_t index = 0;          // position in the map, for messages

  // The axis dropped from the output, one tensor per index ("layer"), if any.
  std::optional<std::string> unstack_axis() const;
  // The axis the output gains, one source tensor per index, if any.
  std::optional<std::string> stack_axis() const;
  // "rule 3 ('transformer.norm.weight')": how errors name the rule.
  std::string label() const;
};

struct TensorMap {
  std::string description;
  AxisSizes sizes;  // axis sizes shared by every rule
  std::vector<TensorMapRule> rules;
};

// Parses a map file's JSON and checks every rule on its own (patterns,
// rearrange, axes, dtypes). Error(kInvalidConfig) naming `label` and the rule
// at fault, as load_tensor_map's for a file.
TensorMap parse_tensor_map(std::string_view json, std::string_view label);

// The map as JSON, in the file format (parse_tensor_map reads it back).
std::string tensor_map_json(const TensorMap& map);

// The same map run backwards: Hugging Face tensors to the framework's. Every
// rule swaps its sides (unstack becomes stack); per-rule casts are dropped,
// since a cast does not invert (import takes its own dtype).
TensorMap inverse_tensor_map(const TensorMap& map);

// Built-in maps by name ("levanter-llama"); nullopt for an unknown name.
std::optional<TensorMap> tensor_map_preset(std::string_view name);
std::vector<std::string> tensor_map_preset_names();

// A preset's name or a map file's path (--map FILE|PRESET): presets win.
// Error(kIo) when the file cannot be read, Error(kInvalidConfig) when it is
// not a map (parse_tensor_map's message).
TensorMap load_tensor_map(std::string_view file_or_preset);

// A short description of the map-file format and the presets, for the --help
// of the commands that take --map (the full text is docs/tensor-map.md).
std::string tensor_map_help();

// The preset's axis sizes that a Hugging Face config.json gives (heads,
// kv_heads, q_per_group, head_dim, embed, mlp, vocab), needed to split merged
// axes on import. Error(kInvalidConfig) naming `label` when a field is malformed.
AxisSizes llama_axis_sizes_from_config(std::string_view config_json, std::string_view label);

}  // namespace reshard
