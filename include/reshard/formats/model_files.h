// Whatever a command is pointed at: a .safetensors file, a Hugging Face model
// folder or a PEFT adapter folder, opened and validated as one set of tensors.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "reshard/formats/hf_index.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/formats/tensor_catalog.h"

namespace reshard {

// The formats `reshard inspect --json` names ("checkpoint" comes later).
enum class ModelFormat { kSafetensors, kHf, kPeft };

// "safetensors", "hf" or "peft".
std::string_view model_format_name(ModelFormat format);

struct ModelFiles {
  ModelFormat format = ModelFormat::kSafetensors;
  std::filesystem::path path;    // as given
  std::optional<HfIndex> index;  // for an indexed Hugging Face folder
  TensorCatalog catalog;         // a lone file is named by its file name
};

// Opens `path`: a file is read as safetensors, a folder as HfFolder::open
// does. Error(kIo) when `path` does not exist.
ModelFiles open_model_files(const std::filesystem::path& path,
                            safetensors::ReadMode mode = safetensors::ReadMode::kMmap);

}  // namespace reshard
