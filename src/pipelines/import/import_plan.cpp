#include "pipelines/import/import_plan.h"

#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipelines/common/small_file.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

namespace {

constexpr std::string_view kConfigFileName = "config.json";

// The preset's stack axis: config.json's layer count, so that a folder
// missing its last layers is an error rather than a shorter stack.
void add_layer_count(std::string_view config_json, AxisSizes& sizes) {
  const auto json = nlohmann::json::parse(config_json, nullptr, false);
  if (!json.is_object() || !json.contains("num_hidden_layers")) return;
  const auto& layers = json["num_hidden_layers"];
  if (!layers.is_number_integer() || layers.get<int64_t>() <= 0) {
    throw Error(ErrorCode::kInvalidConfig, "config.json: 'num_hidden_layers' must be a positive integer");
  }
  sizes["layer"] = layers.get<int64_t>();
}

// adapter_config.json's base_model_name_or_path when it names a local folder
// (a hub id names none here, and is not looked up).
std::optional<storage::Location> adapter_base(const std::string& adapter_config_json) {
  const auto json = nlohmann::json::parse(adapter_config_json, nullptr, false);
  if (!json.is_object() || !json.contains("base_model_name_or_path") || !json["base_model_name_or_path"].is_string()) {
    return std::nullopt;
  }
  const std::filesystem::path base(json["base_model_name_or_path"].get<std::string>());
  std::error_code ec;
  if (!std::filesystem::is_regular_file(base / kConfigFileName, ec)) return std::nullopt;
  return storage::Location(base);
}

// The config.json the sizes come from, with its label for errors: the
// folder's own, else (an adapter folder alone) its base model's.
std::optional<std::pair<std::string, std::string>> sizing_config(const ImportSource& source,
                                                                 const ImportOptions& options) {
  if (source.config_json()) return std::make_pair(*source.config_json(), std::string(kConfigFileName));
  std::optional<storage::Location> base = options.base;
  if (!base && source.adapter_config_json()) base = adapter_base(*source.adapter_config_json());
  if (!base) return std::nullopt;
  // The base model's folder, or its config.json itself.
  const storage::Location file = file_exists(*base) ? *base : base->child(kConfigFileName);
  return std::make_pair(read_small_file(file), file.str());
}

}  // namespace

AxisSizes import_axis_sizes(const ImportSource& source, const ImportOptions& options) {
  AxisSizes sizes;
  if (const auto config = sizing_config(source, options)) {
    sizes = llama_axis_sizes_from_config(config->first, config->second);
    add_layer_count(config->first, sizes);
  }
  for (const auto& [axis, size] : options.sizes) sizes[axis] = size;
  return sizes;
}

ImportPlan plan_import(const ImportSource& source, const TensorMap& forward_map, const CheckpointLayout& layout,
                       const ImportOptions& options) {
  ResolveOptions resolve;
  resolve.dtype = options.dtype;
  resolve.sizes = import_axis_sizes(source, options);
  resolve.skip_unmatched = false;
  resolve.allow_unused_rules = source.adapter_only();
  ImportPlan plan;
  plan.map = resolve_tensor_map(inverse_tensor_map(forward_map), source.specs(), resolve);
  if (plan.map.outputs.empty()) throw Error(ErrorCode::kMissingTensor, "the map produces no tensor from this folder");
  for (const ResolvedTensor& tensor : plan.map.outputs) {
    // sharding_for names the tensor in its errors.
    plan.shardings.push_back(layout.sharding_for(tensor.out.name, safetensors::layout_shape(tensor.out)));
  }
  return plan;
}

}  // namespace reshard::pipelines_detail
