// The demo's checks of the folders an export writes: every tensor of a PEFT
// adapter or a (merged) Hugging Face model against the reference, read with
// the demo's own safetensors reader, and their config files field by field.
#pragma once

#include <filesystem>
#include <string_view>

#include "demo/demo_check.h"
#include "demo/demo_steps.h"

namespace reshard::demo {

// Collective. adapter_model.safetensors holds exactly hf_adapter_tensors,
// each equal to the framework factor it comes from; adapter_config.json has
// the fields PEFT's LoraConfig needs (peft_type LORA, task_type, r,
// lora_alpha, lora_dropout 0, target_modules, bias "none", fan_in_fan_out,
// use_rslora, inference_mode, base_model_name_or_path, modules_to_save,
// rank_pattern, alpha_pattern) with the model's values, written as PEFT
// writes it (sorted keys, two-space indent). `flip` names
// the --self-test-flip value that corrupts this check. Throws the agreed
// Error(kInvalidArgument) "check failed: ..." on any difference.
CheckTally check_adapter_folder(DemoContext& ctx, const std::filesystem::path& folder, std::string_view flip);

// Collective. The folder's weight files (model.safetensors, or those its
// index lists) hold exactly hf_model_tensors(merged), with metadata
// {"format": "pt"}; config.json is the model's.
CheckTally check_model_folder(DemoContext& ctx, const std::filesystem::path& folder, bool merged,
                              std::string_view flip);

}  // namespace reshard::demo
