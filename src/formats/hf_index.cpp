#include "reshard/formats/hf_index.h"

#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

// An index is two levels deep; anything far deeper is hostile input, refused
// before nesting can exhaust the stack.
constexpr int kMaxIndexDepth = 16;

[[noreturn]] void invalid(std::string_view label, std::string_view what) {
  throw Error(file_rule::kInvalidIndex, fmt::format("{}: {}", label, what));
}

nlohmann::json parse_json(std::string_view bytes, std::string_view label) {
  const auto limit_depth = [label](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxIndexDepth) invalid(label, fmt::format("JSON nested deeper than {}", kMaxIndexDepth));
    return true;
  };
  try {
    return nlohmann::json::parse(bytes.begin(), bytes.end(), limit_depth);
  } catch (const nlohmann::json::exception& e) {
    invalid(label, fmt::format("not valid JSON ({})", e.what()));
  }
}

std::optional<uint64_t> unsigned_field(const nlohmann::json& metadata, const char* key) {
  const auto it = metadata.find(key);
  if (it == metadata.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<uint64_t>();
}

}  // namespace

std::vector<std::string> HfIndex::file_names() const {
  std::set<std::string> names;
  for (const auto& [tensor, file] : weight_map) names.insert(file);
  return {names.begin(), names.end()};
}

void check_shard_file_name(std::string_view file_name, std::string_view tensor,
                           std::string_view label) {
  const bool unsafe = file_name.empty() || file_name == "." ||
                      file_name.find("..") != std::string_view::npos ||
                      file_name.find_first_of(std::string_view("/\\\0", 3)) != std::string_view::npos;
  if (unsafe) {
    invalid(label, fmt::format("tensor '{}': file name '{}' is not a plain file name in the "
                               "index's folder",
                               tensor, file_name));
  }
}

HfIndex parse_hf_index(std::string_view bytes, std::string_view label) {
  const nlohmann::json root = parse_json(bytes, label);
  if (!root.is_object()) invalid(label, "the index is not a JSON object");
  const auto map = root.find("weight_map");
  if (map == root.end() || !map->is_object()) invalid(label, "\"weight_map\" is missing or not an object");

  HfIndex index;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string()) invalid(label, fmt::format("tensor '{}': file name is not a string", tensor));
    const std::string& file_name = file.get_ref<const std::string&>();
    check_shard_file_name(file_name, tensor, label);
    index.weight_map.emplace(tensor, file_name);
  }
  if (const auto metadata = root.find("metadata"); metadata != root.end()) {
    if (!metadata->is_object()) invalid(label, "\"metadata\" is not an object");
    index.total_size = unsigned_field(*metadata, "total_size");
    index.total_parameters = unsigned_field(*metadata, "total_parameters");
  }
  return index;
}

std::string hf_index_json(const HfIndex& index) {
  // nlohmann objects are std::maps (keys in bytewise order, which for UTF-8 is
  // Python's code point order), and dump(2, ' ', true) escapes like Python's
  // ensure_ascii: \uXXXX (lower-case hex, surrogate pairs), DEL included.
  nlohmann::json metadata = nlohmann::json::object();
  if (index.total_parameters) metadata["total_parameters"] = *index.total_parameters;
  if (index.total_size) metadata["total_size"] = *index.total_size;
  nlohmann::json weight_map = nlohmann::json::object();
  for (const auto& [tensor, file] : index.weight_map) weight_map[tensor] = file;
  const nlohmann::json root = {{"metadata", metadata}, {"weight_map", weight_map}};
  return root.dump(2, ' ', true) + "\n";
}

}  // namespace reshard
