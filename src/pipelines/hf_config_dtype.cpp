#include "hf_config_dtype.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

std::string torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
    default: return "float32";
  }
}

std::string with_torch_dtype(const std::string& text, DType dtype, std::string_view label) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kParse, fmt::format("{}: not valid JSON: {}", label, e.what()));
  }
  if (!json.is_object()) return text;
  json["torch_dtype"] = torch_dtype_name(dtype);
  return json.dump(2, ' ', true) + "\n";
}

}  // namespace reshard::pipelines_detail
