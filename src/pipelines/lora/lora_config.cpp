#include "reshard/pipelines/lora_config.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipelines/lora/lora_pattern.h"
#include "reshard/layout/error.h"

namespace reshard {

using pipelines_detail::regex_full_match;

namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void bad(std::string_view label, std::string_view field, std::string_view why) {
  throw Error(ErrorCode::kInvalidConfig, fmt::format("{}: '{}' {}", label, field, why));
}

// A number as Python wrote it: integers stay integers (lora_alpha: 16).
nlohmann::json python_number(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 9.0e15) {
    return static_cast<int64_t>(value);
  }
  return value;
}

double number_field(const Json& json, const char* key, double fallback, std::string_view label) {
  if (!json.contains(key)) return fallback;
  if (!json[key].is_number()) bad(label, key, "must be a number");
  return json[key].get<double>();
}

bool bool_field(const Json& json, const char* key, bool fallback, std::string_view label) {
  if (!json.contains(key) || json[key].is_null()) return fallback;
  if (!json[key].is_boolean()) bad(label, key, "must be true or false");
  return json[key].get<bool>();
}

std::optional<std::string> string_field(const Json& json, const char* key, std::optional<std::string> fallback,
                                        std::string_view label) {
  if (!json.contains(key)) return fallback;
  if (json[key].is_null()) return std::nullopt;
  if (!json[key].is_string()) bad(label, key, "must be a string or null");
  return json[key].get<std::string>();
}

// null or absent: none; a list of strings, as PEFT's modules_to_save.
std::vector<std::string> string_list_field(const Json& json, const char* key, std::string_view label) {
  std::vector<std::string> values;
  if (!json.contains(key) || json[key].is_null()) return values;
  const Json& list = json[key];
  if (!list.is_array() || !std::all_of(list.begin(), list.end(), [](const Json& v) { return v.is_string(); })) {
    bad(label, key, "must be a list of strings or null");
  }
  for (const Json& value : list) values.push_back(value.get<std::string>());
  return values;
}

template <typename T>
std::vector<std::pair<std::string, T>> pattern_field(const Json& json, const char* key, std::string_view label) {
  std::vector<std::pair<std::string, T>> patterns;
  if (!json.contains(key) || json[key].is_null()) return patterns;
  if (!json[key].is_object()) bad(label, key, "must be an object");
  for (const auto& [pattern, value] : json[key].items()) {
    if (!value.is_number() || (std::is_integral_v<T> && !value.is_number_integer())) {
      bad(label, key, fmt::format("entry '{}' must be a number", pattern));
    }
    patterns.emplace_back(pattern, value.template get<T>());
  }
  return patterns;
}

// re.match(rf"(.*\.)?({key})$", module): anchored at the start, to the end.
bool matches_end(const std::string& key, std::string_view module) {
  return regex_full_match("(.*\\.)?(" + key + ")", module);
}

// A key that is not a regex is the config file's fault (exit 1), not a usage error.
template <typename T>
std::optional<T> first_match(const std::vector<std::pair<std::string, T>>& patterns, std::string_view module,
                             std::string_view field) {
  for (const auto& [key, value] : patterns) {
    try {
      if (matches_end(key, module)) return value;
    } catch (const Error& e) {
      throw Error(ErrorCode::kInvalidConfig, fmt::format("adapter config: {} key '{}': {}", field, key, e.what()));
    }
  }
  return std::nullopt;
}

}  // namespace

LoraConfig parse_lora_config(std::string_view text, std::string_view label) {
  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::exception& e) {
    throw Error(ErrorCode::kInvalidConfig, fmt::format("{}: not valid JSON: {}", label, e.what()));
  }
  if (!json.is_object()) throw Error(ErrorCode::kInvalidConfig, fmt::format("{}: must be a JSON object", label));
  if (!json.contains("peft_type") || !json["peft_type"].is_string()) bad(label, "peft_type", "must be a string");
  if (const std::string type = json["peft_type"].get<std::string>(); type != "LORA") {
    // A well-formed file of an adapter kind reshard does not merge: unsupported, not malformed.
    throw Error(ErrorCode::kUnsupported,
                fmt::format("{}: peft_type '{}' is not supported (reshard merges and exports LORA adapters only)",
                            label, type));
  }
  LoraConfig config;
  if (json.contains("r")) {
    if (!json["r"].is_number_integer() || json["r"].get<int64_t>() <= 0) bad(label, "r", "must be a positive integer");
    config.r = json["r"].get<int64_t>();
  }
  config.lora_alpha = number_field(json, "lora_alpha", config.lora_alpha, label);
  config.lora_dropout = number_field(json, "lora_dropout", config.lora_dropout, label);
  config.fan_in_fan_out = bool_field(json, "fan_in_fan_out", false, label);
  config.use_rslora = bool_field(json, "use_rslora", false, label);
  config.base_model_name_or_path = string_field(json, "base_model_name_or_path", std::nullopt, label);
  config.task_type = string_field(json, "task_type", std::nullopt, label);
  if (json.contains("target_modules") && !json["target_modules"].is_null()) {
    const Json& modules = json["target_modules"];
    if (modules.is_string()) {
      config.target_modules_regex = modules.get<std::string>();
    } else if (modules.is_array() && std::all_of(modules.begin(), modules.end(), [](const Json& m) { return m.is_string(); })) {
      for (const Json& module : modules) config.target_modules.push_back(module.get<std::string>());
    } else {
      bad(label, "target_modules", "must be a list of strings or a string");
    }
  }
  config.rank_pattern = pattern_field<int64_t>(json, "rank_pattern", label);
  config.alpha_pattern = pattern_field<double>(json, "alpha_pattern", label);
  config.use_dora = bool_field(json, "use_dora", false, label);
  config.lora_bias = bool_field(json, "lora_bias", false, label);
  config.modules_to_save = string_list_field(json, "modules_to_save", label);
  for (const auto& [key, rank] : config.rank_pattern) {
    if (rank <= 0) bad(label, "rank_pattern", fmt::format("entry '{}' must be positive", key));
  }
  return config;
}

std::string lora_config_json(const LoraConfig& config) {
  nlohmann::json json = nlohmann::json::object();  // std::map: keys sorted, as sort_keys=True
  std::vector<std::string> modules = config.target_modules;
  std::sort(modules.begin(), modules.end());
  nlohmann::json rank_pattern = nlohmann::json::object(), alpha_pattern = nlohmann::json::object();
  for (const auto& [key, rank] : config.rank_pattern) rank_pattern[key] = rank;
  for (const auto& [key, alpha] : config.alpha_pattern) alpha_pattern[key] = python_number(alpha);
  json["alpha_pattern"] = alpha_pattern;
  json["base_model_name_or_path"] = config.base_model_name_or_path ? nlohmann::json(*config.base_model_name_or_path)
                                                                   : nlohmann::json(nullptr);
  json["bias"] = "none";
  json["fan_in_fan_out"] = config.fan_in_fan_out;
  json["inference_mode"] = true;
  json["lora_alpha"] = python_number(config.lora_alpha);
  json["lora_dropout"] = config.lora_dropout;
  json["lora_bias"] = config.lora_bias;
  json["modules_to_save"] = config.modules_to_save.empty() ? nlohmann::json(nullptr)
                                                           : nlohmann::json(config.modules_to_save);
  json["peft_type"] = "LORA";
  json["r"] = config.r;
  json["rank_pattern"] = rank_pattern;
  json["target_modules"] = config.target_modules_regex ? nlohmann::json(*config.target_modules_regex)
                                                       : nlohmann::json(modules);
  json["task_type"] = config.task_type ? nlohmann::json(*config.task_type) : nlohmann::json(nullptr);
  json["use_dora"] = config.use_dora;
  json["use_rslora"] = config.use_rslora;
  // indent=2 and ensure_ascii, as json.dumps; PEFT adds no newline at the end.
  return json.dump(2, ' ', true);
}

ModuleLora module_lora(const LoraConfig& config, std::string_view module) {
  ModuleLora lora;
  lora.r = first_match(config.rank_pattern, module, "rank_pattern").value_or(config.r);
  lora.alpha = first_match(config.alpha_pattern, module, "alpha_pattern").value_or(config.lora_alpha);
  const double scaling = config.use_rslora ? lora.alpha / std::sqrt(static_cast<double>(lora.r))
                                           : lora.alpha / static_cast<double>(lora.r);
  lora.scaling = static_cast<float>(scaling);
  return lora;
}

}  // namespace reshard
