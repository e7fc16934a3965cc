// config.json's torch_dtype after a cast: what merge-lora and export write
// beside weights whose dtype they changed.
#pragma once

#include <string>
#include <string_view>

#include "reshard/layout/dtype.h"

namespace reshard::pipelines_detail {

// transformers' name of a float dtype: "bfloat16", "float16", "float32".
std::string torch_dtype_name(DType dtype);

// `text` (a config.json) with torch_dtype set to `dtype`, written as
// transformers writes it (indent 2, sorted keys, a final newline); unchanged
// when it is not a JSON object. Error(kParse) naming `label` if not JSON.
std::string with_torch_dtype(const std::string& text, DType dtype, std::string_view label);

}  // namespace reshard::pipelines_detail
