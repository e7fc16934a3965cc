// How transformers splits a model's tensors into the files of a Hugging Face folder.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace reshard {

// transformers' default --max-shard-size: 5GB, decimal.
inline constexpr uint64_t kDefaultMaxShardSize = 5'000'000'000;

// Splits tensors (their byte sizes, in the order they are to be written) into
// files exactly as huggingface_hub's split_state_dict_into_shards_factory, which
// transformers' save_pretrained uses: greedy in order; a new file starts when
// the next tensor would take the current one past `max_shard_size`; a tensor
// larger than the limit gets a file of its own, placed before the file still
// being filled. Returns, per file in file order, the indices of its tensors in
// their original order. No tensors gives no files.
std::vector<std::vector<size_t>> split_into_shards(std::span<const uint64_t> tensor_bytes,
                                                   uint64_t max_shard_size);

// "model-00002-of-00005.safetensors" for `index` 1 of 5 (five digits each,
// 1-based, as transformers names them; wider counts widen the field).
std::string hf_shard_file_name(size_t index, size_t count);

}  // namespace reshard
