// config.json's dtype keys after a cast: what merge-lora, export and convert
// write beside weights whose dtype they changed.
#pragma once

#include <string>
#include <string_view>

#include "reshard/layout/dtype.h"

namespace reshard::pipelines_detail {

// transformers' name of a float dtype: "bfloat16", "float16", "float32".
std::string torch_dtype_name(DType dtype);

// `text` (a config.json) with every dtype key it holds ("dtype", read by
// transformers 5, and "torch_dtype", read by older releases; in nested
// sub-model configs too) set to `dtype`; a config with neither gets both.
// Written as transformers writes it (indent 2, sorted keys, a final
// newline); unchanged when it is not a JSON object. Error(kInvalidConfig)
// naming `label` if not JSON.
std::string with_config_dtype(const std::string& text, DType dtype, std::string_view label);

}  // namespace reshard::pipelines_detail
