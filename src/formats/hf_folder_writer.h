// Writing a planned Hugging Face folder: the files tensor by tensor, the index
// last, the whole folder appearing at once.
#pragma once

#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "formats/hf_folder_plan.h"
#include "reshard/formats/safetensors_header.h"
#include "reshard/formats/tensor_stream.h"

namespace reshard {

// Writes one planned safetensors file through a StreamWriter, its tensors
// produced in layout order; it appears at `path` (replacing what is there)
// only once complete.
void write_produced_file(const std::filesystem::path& path, const safetensors::FileLayout& layout,
                         const TensorProducer& produce);

// Writes every file of `plan` into the existing folder `folder`, each through
// a StreamWriter (memory bounded by its buffer), then the index if any.
// Tensors are produced file by file, in each file's layout order.
void write_hf_folder_files(const std::filesystem::path& folder, const HfFolderPlan& plan,
                           const TensorProducer& produce);

// The weight files an earlier save may have left in `folder` that a new save
// replaces: model.safetensors, the index and model-NNNNN-of-NNNNN.safetensors
// files, the index first.
std::vector<std::string> hf_weight_files_in(const std::filesystem::path& folder);

// Writes `plan` as the folder `folder` through a StagedFolder: nothing appears
// there until every file is complete. An existing non-empty folder is refused
// unless `replace`, which swaps its weight files and keeps the rest (config,
// tokenizer), as transformers' save_pretrained does.
void write_hf_folder(const std::filesystem::path& folder, const HfFolderPlan& plan,
                     const TensorProducer& produce, bool replace);

}  // namespace reshard
