// adapter_config.json of a PEFT LoRA adapter: read, written as PEFT writes it,
// and the per-module rank, alpha and scaling it implies, as PEFT reads them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace reshard {

struct LoraConfig {
  int64_t r = 8;
  double lora_alpha = 8;
  double lora_dropout = 0.0;
  std::vector<std::string> target_modules;     // module names ("q_proj"), written sorted
  std::optional<std::string> target_modules_regex;  // when the file gives one string instead
  bool fan_in_fan_out = false;
  bool use_rslora = false;
  std::optional<std::string> base_model_name_or_path;
  std::optional<std::string> task_type = "CAUSAL_LM";
  // Per-module overrides, in the order they are tried (the file's order).
  std::vector<std::pair<std::string, int64_t>> rank_pattern;
  std::vector<std::pair<std::string, double>> alpha_pattern;
  bool use_dora = false;   // DoRA: each module also has a magnitude vector
  bool lora_bias = false;  // lora_B has a bias, added to the base layer's
  std::vector<std::string> modules_to_save;  // modules the adapter holds whole copies of
};

// Parses adapter_config.json. Error(kInvalidConfig) naming `label` and the
// field when it is not JSON or a field has the wrong type; Error(kUnsupported)
// naming the type when peft_type is not "LORA". Unknown fields are ignored, as
// PEFT ignores them.
LoraConfig parse_lora_config(std::string_view json, std::string_view label);

// The file as PEFT's save_pretrained writes it: json.dumps(config, indent=2,
// sort_keys=True), no trailing newline, with the fields LoraConfig holds.
std::string lora_config_json(const LoraConfig& config);

// One adapted module's rank, alpha and the scaling its delta is multiplied by.
struct ModuleLora {
  int64_t r = 0;
  double alpha = 0;
  float scaling = 0;  // alpha / r, or alpha / sqrt(r) with use_rslora, as f32
};

// PEFT's choice for module `module` ("model.layers.0.self_attn.q_proj"): the
// first rank_pattern (alpha_pattern) key that matches the end of the name
// (the regex `(.*\.)?(KEY)$` from the start, as peft's get_pattern_key) gives
// r (alpha); else the config's. Error(kInvalidConfig) for a key that is not a regex.
ModuleLora module_lora(const LoraConfig& config, std::string_view module);

}  // namespace reshard
