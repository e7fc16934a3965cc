// Writing a planned Hugging Face folder, local or in an object store: the
// files tensor by tensor, the index last, the whole folder appearing at once
// (output_folder.h has each place's commit rules).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "formats/hf_folder_plan.h"
#include "formats/output_folder.h"
#include "reshard/formats/safetensors_header.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/storage/location.h"
#include "reshard/storage/object_writer.h"

namespace reshard::formats_detail {

// Writes one planned safetensors file through a StreamWriter, its tensors
// produced in layout order; it appears at `where` (replacing what is there)
// only once complete. An object is uploaded as `upload` says.
void write_produced_file(const storage::Location& where, const safetensors::FileLayout& layout,
                         const TensorProducer& produce, const storage::UploadOptions& upload = {});

// Writes the weight files of `plan` into `out`, each through a StreamWriter
// (memory bounded by its buffer and parts), tensors produced file by file in
// each file's layout order. The index is not written: it goes last, after
// the configs (write_hf_index).
void write_hf_weight_files(const OutputFolder& out, const HfFolderPlan& plan, const TensorProducer& produce,
                           const storage::UploadOptions& upload = {});
// Writes the plan's index, if it has one.
void write_hf_index(const OutputFolder& out, const HfFolderPlan& plan);
// The files of `plan` in the order that completes the folder: the weight
// files, then the index.
std::vector<std::string> hf_folder_file_names(const HfFolderPlan& plan);

// Of `names` (a folder's files), the weight files a new save replaces:
// model.safetensors, the index and model-NNNNN-of-NNNNN.safetensors, the
// index first.
std::vector<std::string> hf_weight_files_among(std::span<const std::string> names);
// The same among the files of `folder` (local or a prefix).
std::vector<std::string> hf_weight_files_in(const storage::Location& folder);

// Writes `plan` as the folder `folder` through an OutputFolder: nothing
// appears there until every file is complete. An existing non-empty folder
// is refused unless `replace`, which swaps its weight files and keeps the
// rest (config, tokenizer), as transformers' save_pretrained does.
void write_hf_folder(const storage::Location& folder, const HfFolderPlan& plan, const TensorProducer& produce,
                     bool replace, const storage::UploadOptions& upload = {});

}  // namespace reshard::formats_detail
