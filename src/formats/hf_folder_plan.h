// A Hugging Face folder to be written: which file holds which tensor, each
// file's layout, and the index, all computed before any byte is written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reshard/formats/hf_index.h"
#include "reshard/formats/safetensors_layout.h"

namespace reshard::formats_detail {

class HfFolderPlan {
 public:
  // One planned file of the folder.
  struct File {
    std::string name;                 // "model.safetensors" or "model-0000i-of-0000N.safetensors"
    safetensors::FileLayout layout;   // tensors in the reference writer's order
  };

  // Splits `tensors`, given in the order they are to be split (transformers
  // uses the state dict's order), with split_into_shards. A single file (or
  // no tensors at all) is named model.safetensors and has no index; several
  // get numbered names and an index with total_size (sum of tensor bytes) and
  // total_parameters (sum of element counts). Every file gets `metadata`.
  static HfFolderPlan plan(const std::vector<safetensors::TensorSpec>& tensors,
                           uint64_t max_shard_size,
                           std::optional<safetensors::Metadata> metadata = safetensors::default_metadata());

  const std::vector<File>& files() const { return files_; }
  // The index to write, or nullopt for a single file.
  const std::optional<HfIndex>& index() const { return index_; }
  // Sum of every file's size, headers included.
  uint64_t total_file_bytes() const;

 private:
  std::vector<File> files_;
  std::optional<HfIndex> index_;
};

}  // namespace reshard::formats_detail
