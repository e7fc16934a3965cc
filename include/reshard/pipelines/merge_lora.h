// `merge-lora`: a Hugging Face base model plus a PEFT LoRA adapter to a merged
// Hugging Face model, tensor by tensor, memory bounded by a few row blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "reshard/formats/hf_split.h"
#include "reshard/layout/dtype.h"
#include "reshard/pipelines/lora_config.h"

namespace reshard {

struct MergeLoraOptions {
  std::optional<DType> dtype;                     // cast F32/F16/BF16 tensors after merging
  uint64_t max_shard_size = kDefaultMaxShardSize;
  bool replace = false;                           // write over an existing folder's weight files
  size_t chunk_bytes = size_t{8} << 20;           // at most this much of a weight is read and merged at a time
  std::function<void(uint64_t bytes)> progress;   // output bytes produced, as they are
};

struct MergeLoraSummary {
  size_t tensors = 0;        // in the output
  size_t merged = 0;         // weights a LoRA delta was added to
  size_t files = 0;          // weight files written
  uint64_t bytes = 0;        // tensor bytes written
  std::vector<std::string> copied;  // config files copied beside the weights
};

// The config files copied from the base folder: config.json and
// generation_config.json. With a dtype, config.json's torch_dtype is updated.
inline constexpr const char* kMergeLoraCopiedFiles[] = {"config.json", "generation_config.json"};

// Merges `adapter` (a PEFT LoRA adapter folder) into `base` (a Hugging Face
// folder, or one .safetensors file), writing the folder `out` as `reshard
// convert` does (split at max_shard_size, appearing only when complete). Every
// adapter key is checked against the base first (Error kMissingTensor naming
// it), and every A/B pair against its weight and the config's rank (Error
// kInvalidArgument naming the module), before anything is written. Base
// tensors are read with pread in blocks, so memory stays at a few blocks plus
// each module's A and B, whatever the model's size.
MergeLoraSummary merge_lora_folder(const std::filesystem::path& base, const std::filesystem::path& adapter,
                                   const std::filesystem::path& out, const MergeLoraOptions& options = {});

}  // namespace reshard
