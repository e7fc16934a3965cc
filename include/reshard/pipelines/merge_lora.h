// `merge-lora`: a Hugging Face base model plus a PEFT LoRA adapter to a merged
// Hugging Face model, tensor by tensor, memory bounded by a few row blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "reshard/formats/hf_split.h"
#include "reshard/layout/dtype.h"
#include "reshard/pipelines/lora_config.h"
#include "reshard/storage/location.h"
#include "reshard/storage/object_writer.h"

namespace reshard {

struct MergeLoraOptions {
  std::optional<DType> dtype;                     // cast F32/F16/BF16 tensors after merging
  uint64_t max_shard_size = kDefaultMaxShardSize;
  bool replace = false;                           // write over an existing folder's weight files
  size_t block_bytes = size_t{8} << 20;           // at most this much of a weight is read and merged at a time
  int threads = 0;                                // merging threads per block; 0: the host's cores
  std::function<void(uint64_t bytes)> progress;   // output bytes produced, as they are
  storage::UploadOptions upload;                  // an `out` in an object store: part size, parts in flight
};

struct MergeLoraResult {
  size_t tensors = 0;        // in the output
  size_t merged = 0;         // weights a LoRA delta was added to
  size_t replaced = 0;       // tensors taken whole from the adapter (modules_to_save, saved base layers)
  size_t files = 0;          // weight files written
  uint64_t bytes = 0;        // tensor bytes written
  std::vector<std::string> carried;   // the base folder's non-weight files carried beside the weights (ConvertResult's word)
  std::vector<std::string> warnings;  // what the output lacks that its users will miss (no config.json)
};

// Merges `adapter` (a PEFT LoRA adapter folder) into `base` (a Hugging Face
// folder, or one .safetensors file), writing the folder `out` as `reshard
// convert` does (split at max_shard_size, appearing only when complete), as
// PEFT's merge_and_unload defines the result: plain LoRA, rsLoRA and the
// rank/alpha patterns, fan_in_fan_out, DoRA (use_dora: the magnitude vector
// over the norm of W + dW per output feature), LoRA on embeddings
// (lora_embedding_A/B), lora_B's bias (lora_bias), and whole tensors the
// adapter holds (modules_to_save copies, saved base layers), which replace the
// base's. The base folder's non-weight files (config.json with its dtype keys
// following options.dtype, generation_config.json, the tokenizer's files, ...)
// are carried; a base without config.json gives a warning in the result.
// Every adapter key is checked against the base and the config first (Error
// kMissingTensor naming the key or module, kUnsupported for a kind PEFT does
// not write or the config does not enable, kInvalidArgument for a shape that
// does not fit), before anything is written. Base tensors are read with pread
// in blocks, so memory stays at a few blocks plus each module's factors,
// whatever the model's size; a weight's next block is read and its last one
// written while the current one is merged over options.threads threads.
// Error(kInvalidArgument) for negative threads.
// Each of `base`, `adapter` and `out` may be local or in an object store
// (s3://, gs://): the inputs are read by byte ranges; an `out` in a store
// gets its weight files uploaded in parts (options.upload), then the carried
// files, then the index, and is refused before anything is uploaded when it
// holds objects (unless replacing, which removes the old weight files the new
// folder lacks, last); a failure leaves nothing in a folder that was empty.
MergeLoraResult merge_lora_folder(const storage::Location& base, const storage::Location& adapter,
                                  const storage::Location& out, const MergeLoraOptions& options = {});

}  // namespace reshard
