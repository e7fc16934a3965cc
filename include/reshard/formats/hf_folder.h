// Reading Hugging Face folders: a model (one file, or an index and its files)
// or a PEFT adapter, every file and the index validated together at open.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "reshard/formats/hf_index.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/formats/tensor_catalog.h"
#include "reshard/storage/location.h"

namespace reshard {

// The weights file of a PEFT adapter folder (beside adapter_config.json).
inline constexpr std::string_view kPeftAdapterFileName = "adapter_model.safetensors";
inline constexpr std::string_view kPeftConfigFileName = "adapter_config.json";

// What a folder holds, told by its file names.
enum class HfFolderKind {
  kSingleFile,   // model.safetensors
  kIndexed,      // model.safetensors.index.json and the files it names
  kPeftAdapter,  // adapter_model.safetensors
};

// An open, validated folder.
struct HfFolder {
  HfFolderKind kind = HfFolderKind::kSingleFile;
  storage::Location folder;
  std::optional<HfIndex> index;  // set for kIndexed
  TensorCatalog catalog;         // file names relative to the folder

  // The kind of `folder` by the files in it, or nullopt when it is not one of
  // these. model.safetensors wins over an index, as in transformers' loader.
  static std::optional<HfFolderKind> detect(const storage::Location& folder);

  // Opens and validates every file. For an index: each file it names (refusing
  // names that leave the folder, Error kInvalidIndex); a tensor listed but
  // absent from its file is Error(kMissingTensor), a tensor in a file but not
  // listed for it is Error(kInvalidIndex), both naming the file and tensor.
  // Error(kUnsupported) when the folder is none of the kinds above.
  static HfFolder open(const storage::Location& folder,
                       safetensors::ReadMode mode = safetensors::ReadMode::kMmap);
};

// The index read from `where` (at most 100,000,000 bytes, Error kInvalidIndex
// beyond), parsed and validated.
HfIndex read_hf_index(const storage::Location& where);

// Checks that `files` (named by `index`, in index.file_names() order) hold
// exactly the tensors the index lists for each. `folder` names them in errors.
void check_index_matches_files(const HfIndex& index, const storage::Location& folder,
                               std::span<const safetensors::File> files);

}  // namespace reshard
