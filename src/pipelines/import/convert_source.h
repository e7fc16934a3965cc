// What a conversion reads from: the tensors of a safetensors file or
// Hugging Face folder, or of a checkpoint, read box by box.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reshard/formats/checkpoint_reader.h"
#include "reshard/formats/model_files.h"
#include "reshard/formats/safetensors_header.h"
#include "reshard/layout/box.h"
#include "reshard/storage/location.h"

namespace reshard::pipelines_detail {

struct SourceTensor {
  std::string name;
  DType dtype = DType::kF32;
  safetensors::Dims dims;
};

class ConvertSource {
 public:
  // Opens a checkpoint folder, or else a file or Hugging Face folder
  // (Error(kUnsupported) for a PEFT adapter), local or in an object store.
  static ConvertSource open(const storage::Location& path);

  bool is_checkpoint() const { return checkpoint_.has_value(); }
  bool is_single_safetensors_file() const { return model_ && model_->format == ModelFormat::kSafetensors; }
  // Tensors in source order (file by file and by offset; a checkpoint's save order).
  const std::vector<SourceTensor>& tensors() const { return tensors_; }
  std::optional<safetensors::Metadata> metadata() const;
  // Pieces of a tensor that can be read independently and cheaply: a
  // checkpoint's chunks, or row ranges of a file's tensor (at most `parts`).
  std::vector<Box> pieces(size_t tensor, int parts) const;
  // Reads `box` of tensor `tensor` in its own dtype, dense, into `out`.
  void read_box(size_t tensor, const Box& box, std::span<std::byte> out) const;
  // Data files read, headers included, for messages.
  size_t file_count() const;

 private:
  std::optional<ModelFiles> model_;
  std::optional<checkpoint::Reader> checkpoint_;
  std::vector<SourceTensor> tensors_;
};

// Reads `box` of tensor `tensor` of `source`, cast to `out_dtype` (dense, row-major).
std::vector<std::byte> read_cast(const ConvertSource& source, size_t tensor, const Box& box, DType out_dtype);

}  // namespace reshard::pipelines_detail
