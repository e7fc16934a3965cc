// The tensors of a small Levanter-style Llama (stacked layers, separate head
// axes, LoRA on q and o), names, dtypes and shapes only, for the tests of the
// levanter-llama map.
#pragma once

#include <vector>

#include "pipelines/support/levanter_model.h"
#include "reshard/formats/safetensors_layout.h"

namespace reshard::testing {

// In source order: embeddings (bf16, so a 2-byte dtype goes through the map
// too), the stacked layer weights, final norm, lm_head, then q's and o's LoRA
// factors; everything but the embeddings f32.
std::vector<safetensors::TensorSpec> levanter_specs(const LevanterDims& dims);

}  // namespace reshard::testing
