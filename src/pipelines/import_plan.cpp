#include "import_plan.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

namespace {

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

}  // namespace

AxisSizes import_axis_sizes(const ImportSource& source, const ImportOptions& options) {
  AxisSizes sizes;
  if (source.config_json()) {
    sizes = llama_axis_sizes_from_config(*source.config_json(), "config.json");
    add_layer_count(*source.config_json(), sizes);
  }
  for (const auto& [axis, size] : options.sizes) sizes[axis] = size;
  return sizes;
}

ImportPlan plan_import(const ImportSource& source, const TensorMap& forward_map, const ImportOptions& options) {
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
    plan.shardings.push_back(options.layout.sharding_for(tensor.out.name, safetensors::layout_shape(tensor.out)));
  }
  return plan;
}

}  // namespace reshard::pipelines_detail
