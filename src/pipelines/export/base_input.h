// A merged export's input when the LoRA factors come from one source and the
// weights they merge into from a Hugging Face base model: the source's
// tensors, then the base's, read box by box wherever the export asks.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipelines/export/export_input.h"
#include "pipelines/export/export_plan.h"
#include "reshard/formats/model_files.h"
#include "reshard/storage/location.h"

namespace reshard::pipelines_detail {

class BaseModelInput final : public ExportInput {
 public:
  // Opens `base`, a Hugging Face folder or .safetensors file, local or in an
  // object store (read by ranges): Error(kInvalidArgument) for a PEFT adapter
  // folder, whose tensors are no model's weights.
  BaseModelInput(const ExportInput& source, const storage::Location& base);

  const std::vector<safetensors::TensorSpec>& specs() const override { return specs_; }
  // The source's tensors as the source says; the base's anywhere.
  bool readable_by(int process, size_t source, const Box& box) const override;
  void read(size_t source, const Box& box, std::span<std::byte> out) const override;

  // The base's tensors, as the plan takes them.
  const MergeBase& merge_base() const { return merge_base_; }
  // config.json (or another file) beside the base's weights, if it is there.
  std::optional<std::string> base_file(std::string_view name) const;

 private:
  const ExportInput& source_;
  size_t own_ = 0;  // the source's tensors come first
  storage::Location base_;
  ModelFiles files_;
  MergeBase merge_base_;
  std::vector<safetensors::TensorSpec> specs_;
};

}  // namespace reshard::pipelines_detail
