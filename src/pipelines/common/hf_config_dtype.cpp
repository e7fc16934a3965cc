#include "pipelines/common/hf_config_dtype.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {
namespace {

constexpr const char* kDtypeKeys[] = {"dtype", "torch_dtype"};

// Sets the dtype keys `json` and its nested objects hold; true if any was found.
bool set_present_keys(nlohmann::json& json, const std::string& name) {
  bool found = false;
  for (auto& [key, value] : json.items()) {
    if (value.is_object()) {
      found = set_present_keys(value, name) || found;
    } else if ((key == kDtypeKeys[0] || key == kDtypeKeys[1]) && (value.is_string() || value.is_null())) {
      value = name;
      found = true;
    }
  }
  return found;
}

}  // namespace

std::string torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
    default: return "float32";
  }
}

std::string with_config_dtype(const std::string& text, DType dtype, std::string_view label) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidConfig, fmt::format("{}: not valid JSON: {}", label, e.what()));
  }
  if (!json.is_object()) return text;
  const std::string name = torch_dtype_name(dtype);
  if (!set_present_keys(json, name)) {
    for (const char* key : kDtypeKeys) json[key] = name;
  }
  return json.dump(2, ' ', true) + "\n";
}

}  // namespace reshard::pipelines_detail
