// Whatever a command is pointed at: a .safetensors file, a Hugging Face model
// folder or a PEFT adapter folder, opened and validated as one set of tensors.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "reshard/formats/hf_index.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/formats/tensor_catalog.h"
#include "reshard/storage/location.h"

namespace reshard {

// The formats `reshard inspect --json` names ("checkpoint" comes later).
enum class ModelFormat { kSafetensors, kHf, kPeft };

// "safetensors", "hf" or "peft".
std::string_view model_format_name(ModelFormat format);

struct ModelFiles {
  ModelFormat format = ModelFormat::kSafetensors;
  storage::Location path;        // as given
  std::optional<HfIndex> index;  // for an indexed Hugging Face folder
  TensorCatalog catalog;         // a lone file is named by its file name
};

// Opens `path` (local, or objects in a store): a file is read as safetensors,
// a folder (or a prefix of objects) as HfFolder::open does. Error(kIo) when
// nothing is there.
ModelFiles open_model_files(const storage::Location& path,
                            safetensors::ReadMode mode = safetensors::ReadMode::kMmap);

}  // namespace reshard
