// The base weights a LoRA adapter's own factors imply, for an export whose
// source holds the factors alone (a LoRA run's checkpoint saves only what it
// trains), so that the adapter's keys, pairs, ranks and shapes are still
// checked where no base model is at hand.
#pragma once

#include <span>

#include "pipelines/lora/merge_lora_plan.h"
#include "reshard/formats/safetensors_layout.h"

namespace reshard::pipelines_detail {

// Each module's weight as B's rows by A's columns ([in, out] for embeddings
// and with `fan_in_fan_out`), in A's dtype; a whole tensor the adapter
// replaces as itself. Valid on its own (it copies what it needs).
BaseTensors implied_base(std::span<const safetensors::TensorSpec> adapter, bool fan_in_fan_out);

}  // namespace reshard::pipelines_detail
