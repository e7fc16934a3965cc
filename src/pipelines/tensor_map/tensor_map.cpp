#include "reshard/pipelines/tensor_map.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipelines/tensor_map/tensor_map_pattern.h"
#include "reshard/layout/error.h"

namespace reshard {

using pipelines_detail::parse_name_pattern;
using pipelines_detail::parse_rearrange;
using pipelines_detail::rearrange_text;

namespace {

using Json = nlohmann::ordered_json;

// A map is configuration, whichever way it comes (a file, JSON text from
// Python): what is wrong with it is kInvalidConfig, one code everywhere.
[[noreturn]] void bad(std::string_view what, std::string_view why) {
  throw Error(ErrorCode::kInvalidConfig, fmt::format("{}: {}", what, why));
}

std::set<std::string> names_of(const AxisGroups& groups) {
  std::set<std::string> names;
  for (const auto& group : groups) names.insert(group.begin(), group.end());
  return names;
}

std::set<std::string> placeholders_of(const std::string& pattern, std::string_view what) {
  const auto names = parse_name_pattern(pattern, what).placeholders();
  return {names.begin(), names.end()};
}

// The one axis of `side` that `other` lacks, or nullopt.
std::optional<std::string> extra_axis(const AxisGroups& side, const AxisGroups& other) {
  const std::set<std::string> theirs = names_of(other);
  for (const auto& group : side) {
    for (const std::string& name : group) {
      if (!theirs.count(name)) return name;
    }
  }
  return std::nullopt;
}

bool is_own_dimension(const AxisGroups& side, const std::string& axis) {
  return std::any_of(side.begin(), side.end(), [&](const auto& g) { return g.size() == 1 && g[0] == axis; });
}

// The checks a rule passes on its own, before it meets any tensor.
void check_rule(const TensorMapRule& rule, std::string_view what) {
  std::set<std::string> from_names = placeholders_of(rule.from, what);
  std::set<std::string> to_names = placeholders_of(rule.to, what);
  if (rule.rearranged) {
    const std::set<std::string> left = names_of(rule.from_axes), right = names_of(rule.to_axes);
    std::vector<std::string> only_left, only_right;
    std::set_difference(left.begin(), left.end(), right.begin(), right.end(), std::back_inserter(only_left));
    std::set_difference(right.begin(), right.end(), left.begin(), left.end(), std::back_inserter(only_right));
    if (only_left.size() + only_right.size() > 1) {
      bad(what, "rearrange: at most one axis may appear on one side only (the axis to unstack or stack)");
    }
    for (const std::string& axis : only_left) {
      if (!is_own_dimension(rule.from_axes, axis)) bad(what, fmt::format("unstack axis '{}' must be a dimension of its own", axis));
      if (!to_names.count(axis)) bad(what, fmt::format("'to' must name the unstacked tensors with {{{}}}", axis));
      if (from_names.count(axis)) bad(what, fmt::format("{{{}}} names the unstack axis and cannot be in 'from'", axis));
      to_names.erase(axis);
    }
    for (const std::string& axis : only_right) {
      if (!is_own_dimension(rule.to_axes, axis)) bad(what, fmt::format("stack axis '{}' must be a dimension of its own", axis));
      if (!from_names.count(axis)) bad(what, fmt::format("'from' must capture the stacked index as {{{}}}", axis));
      if (to_names.count(axis)) bad(what, fmt::format("{{{}}} names the stack axis and cannot be in 'to'", axis));
      from_names.erase(axis);
    }
  }
  if (from_names != to_names) {
    bad(what, "'from' and 'to' must use the same placeholders (besides the axis unstacked or stacked)");
  }
  for (const auto& [axis, size] : rule.sizes) {
    if (size <= 0) bad(what, fmt::format("sizes: '{}' must be a positive integer", axis));
  }
}

AxisSizes parse_sizes(const Json& json, std::string_view what) {
  AxisSizes sizes;
  if (!json.is_object()) bad(what, "'sizes' must be an object of axis names to positive integers");
  for (const auto& [axis, size] : json.items()) {
    if (!size.is_number_integer() || size.get<int64_t>() <= 0) {
      bad(what, fmt::format("sizes: '{}' must be a positive integer", axis));
    }
    sizes[axis] = size.get<int64_t>();
  }
  return sizes;
}

std::string required_string(const Json& rule, const char* key, std::string_view what) {
  if (!rule.contains(key) || !rule[key].is_string()) bad(what, fmt::format("'{}' must be a string", key));
  return rule[key].get<std::string>();
}

TensorMapRule parse_rule(const Json& json, size_t index, std::string_view label) {
  const std::string what = fmt::format("{}: rule {}", label, index);
  if (!json.is_object()) bad(what, "a rule must be an object");
  static const std::set<std::string> kKeys = {"from", "to", "rearrange", "sizes", "dtype", "optional"};
  for (const auto& [key, value] : json.items()) {
    if (!kKeys.count(key)) bad(what, fmt::format("unknown key '{}'", key));
  }
  TensorMapRule rule;
  rule.index = index;
  rule.from = required_string(json, "from", what);
  rule.to = required_string(json, "to", what);
  const std::string labelled = fmt::format("{} ('{}')", what, rule.from);
  if (json.contains("rearrange")) {
    if (!json["rearrange"].is_string()) bad(labelled, "'rearrange' must be a string");
    std::tie(rule.from_axes, rule.to_axes) = parse_rearrange(json["rearrange"].get<std::string>(), labelled);
    rule.rearranged = true;
  }
  if (json.contains("sizes")) rule.sizes = parse_sizes(json["sizes"], labelled);
  if (json.contains("dtype")) {
    if (!json["dtype"].is_string()) bad(labelled, "'dtype' must be f32, f16 or bf16");
    const std::optional<DType> dtype = parse_dtype(json["dtype"].get<std::string>());
    if (!dtype || !is_castable_float(*dtype)) bad(labelled, "'dtype' must be f32, f16 or bf16");
    rule.dtype = dtype;
  }
  if (json.contains("optional")) {
    if (!json["optional"].is_boolean()) bad(labelled, "'optional' must be true or false");
    rule.optional = json["optional"].get<bool>();
  }
  check_rule(rule, labelled);
  return rule;
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, fmt::format("{}: cannot read the map file", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::kIo, fmt::format("{}: cannot read the map file", path.string()));
  return text.str();
}

TensorMap parse_map_json(std::string_view text, std::string_view label) {
  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::exception& e) {
    bad(label, fmt::format("not valid JSON: {}", e.what()));
  }
  if (!json.is_object()) bad(label, "a map file is a JSON object with \"rules\"");
  TensorMap map;
  for (const auto& [key, value] : json.items()) {
    if (key == "description") {
      if (!value.is_string()) bad(label, "'description' must be a string");
      map.description = value.get<std::string>();
    } else if (key == "sizes") {
      map.sizes = parse_sizes(value, label);
    } else if (key == "rules") {
      if (!value.is_array()) bad(label, "'rules' must be a list");
      for (size_t i = 0; i < value.size(); ++i) map.rules.push_back(parse_rule(value[i], i, label));
    } else {
      bad(label, fmt::format("unknown key '{}'", key));
    }
  }
  if (!json.contains("rules")) bad(label, "a map file needs \"rules\"");
  return map;
}

}  // namespace

std::optional<std::string> TensorMapRule::unstack_axis() const {
  return rearranged ? extra_axis(from_axes, to_axes) : std::nullopt;
}

std::optional<std::string> TensorMapRule::stack_axis() const {
  return rearranged ? extra_axis(to_axes, from_axes) : std::nullopt;
}

std::string TensorMapRule::label() const { return fmt::format("rule {} ('{}')", index, from); }

TensorMap parse_tensor_map(std::string_view text, std::string_view label) {
  try {
    return parse_map_json(text, label);
  } catch (const Error& e) {
    // The rules' parts (patterns, rearrange, dtypes) are parsed by functions
    // that also read flags, where a bad text is kParse; in a map it is bad config.
    if (e.code() == ErrorCode::kParse) throw Error(ErrorCode::kInvalidConfig, e.what());
    throw;
  }
}

std::string tensor_map_json(const TensorMap& map) {
  Json json = Json::object();
  if (!map.description.empty()) json["description"] = map.description;
  if (!map.sizes.empty()) json["sizes"] = map.sizes;
  json["rules"] = Json::array();
  for (const TensorMapRule& rule : map.rules) {
    Json entry = {{"from", rule.from}, {"to", rule.to}};
    if (rule.rearranged) entry["rearrange"] = rearrange_text(rule.from_axes, rule.to_axes);
    if (!rule.sizes.empty()) entry["sizes"] = rule.sizes;
    if (rule.dtype) entry["dtype"] = dtype_name(*rule.dtype);
    if (rule.optional) entry["optional"] = true;
    json["rules"].push_back(std::move(entry));
  }
  return json.dump(2) + "\n";
}

TensorMap inverse_tensor_map(const TensorMap& map) {
  TensorMap inverse = map;
  for (TensorMapRule& rule : inverse.rules) {
    std::swap(rule.from, rule.to);
    std::swap(rule.from_axes, rule.to_axes);
    rule.dtype.reset();
  }
  return inverse;
}

TensorMap load_tensor_map(std::string_view file_or_preset) {
  if (std::optional<TensorMap> preset = tensor_map_preset(file_or_preset)) return *preset;
  const std::filesystem::path path{std::string(file_or_preset)};
  std::error_code ec;
  // A bare name that is no file is a preset name mistyped, not a file to read.
  if (!std::filesystem::exists(path, ec) && !path.has_parent_path() && path.extension() != ".json") {
    std::string names;
    for (const std::string& name : tensor_map_preset_names()) names += (names.empty() ? "" : ", ") + name;
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("unknown preset '{}'; presets: {} (or a map file's path)", file_or_preset, names));
  }
  return parse_tensor_map(read_text_file(path), path.string());
}

AxisSizes llama_axis_sizes_from_config(std::string_view config_json, std::string_view label) {
  Json json;
  try {
    json = Json::parse(config_json);
  } catch (const Json::exception& e) {
    throw Error(ErrorCode::kInvalidConfig, fmt::format("{}: not valid JSON: {}", label, e.what()));
  }
  const auto field = [&](const char* key) -> std::optional<int64_t> {
    if (!json.is_object() || !json.contains(key) || json[key].is_null()) return std::nullopt;
    if (!json[key].is_number_integer() || json[key].get<int64_t>() <= 0) {
      throw Error(ErrorCode::kInvalidConfig, fmt::format("{}: '{}' must be a positive integer", label, key));
    }
    return json[key].get<int64_t>();
  };
  AxisSizes sizes;
  const auto heads = field("num_attention_heads");
  const auto kv_heads = field("num_key_value_heads").has_value() ? field("num_key_value_heads") : heads;
  const auto hidden = field("hidden_size");
  if (hidden) sizes["embed"] = *hidden;
  if (auto mlp = field("intermediate_size")) sizes["mlp"] = *mlp;
  if (auto vocab = field("vocab_size")) sizes["vocab"] = *vocab;
  if (heads) sizes["heads"] = *heads;
  if (kv_heads) sizes["kv_heads"] = *kv_heads;
  if (heads && kv_heads && *heads % *kv_heads == 0) sizes["q_per_group"] = *heads / *kv_heads;
  if (auto head_dim = field("head_dim")) {
    sizes["head_dim"] = *head_dim;
  } else if (heads && hidden && *hidden % *heads == 0) {
    sizes["head_dim"] = *hidden / *heads;
  }
  return sizes;
}

}  // namespace reshard
