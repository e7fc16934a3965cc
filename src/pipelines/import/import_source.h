// What an import reads: a Hugging Face model folder (one file or an index
// and its files), a PEFT adapter folder, or a model folder with an adapter's
// weights beside its own, local (every file memory-mapped) or in an object
// store (read by byte ranges), with the config texts found beside the weights.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reshard/formats/safetensors_layout.h"
#include "reshard/formats/tensor_catalog.h"
#include "reshard/layout/box.h"
#include "reshard/storage/location.h"

namespace reshard::pipelines_detail {

class ImportSource {
 public:
  // Opens and validates every weight file of `path` (a folder or prefix, or a
  // lone .safetensors file) and reads config.json / adapter_config.json when
  // there. Error(kIo) when `path` does not exist, the folder's own errors otherwise.
  static ImportSource open(const storage::Location& path);

  // Every tensor, in source order (the model's files, then the adapter's).
  const std::vector<safetensors::TensorSpec>& specs() const { return specs_; }
  // Whether bytes() works: every file is mapped (local files).
  bool has_views() const { return has_views_; }
  // Tensor `source`'s bytes inside its file's mapping: reading a part of the
  // view reads only the pages it touches. Error(kUnsupported) without views.
  std::span<const std::byte> bytes(size_t source) const;
  // Reads `box` of tensor `source` (dense, row-major, its own dtype) into
  // `out`, fetching only the byte runs the box covers.
  void read_box(size_t source, const Box& box, std::span<std::byte> out) const;
  // Only adapter weights (a PEFT folder): a map's model rules then match nothing.
  bool adapter_only() const { return adapter_only_; }
  const std::optional<std::string>& config_json() const { return config_json_; }
  const std::optional<std::string>& adapter_config_json() const { return adapter_config_json_; }
  const std::optional<std::string>& generation_config_json() const { return generation_config_json_; }

 private:
  TensorCatalog catalog_;
  std::vector<safetensors::TensorSpec> specs_;
  bool has_views_ = true;
  bool adapter_only_ = false;
  std::optional<std::string> config_json_;
  std::optional<std::string> adapter_config_json_;
  std::optional<std::string> generation_config_json_;
};

}  // namespace reshard::pipelines_detail
