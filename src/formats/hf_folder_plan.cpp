#include "formats/hf_folder_plan.h"

#include <unordered_set>

#include <fmt/format.h>

#include "layout/checked.h"
#include "reshard/formats/hf_split.h"
#include "reshard/layout/error.h"

namespace reshard::formats_detail {

using layout_detail::checked_add;

namespace {

uint64_t spec_bytes(const safetensors::TensorSpec& spec) {
  return dtype_byte_size(spec.dtype, safetensors::element_count(spec.shape, spec.name));
}

uint64_t spec_elements(const safetensors::TensorSpec& spec) {
  return safetensors::element_count(spec.shape, spec.name);
}

}  // namespace

HfFolderPlan HfFolderPlan::plan(const std::vector<safetensors::TensorSpec>& tensors,
                                uint64_t max_shard_size, std::optional<safetensors::Metadata> metadata) {
  std::vector<uint64_t> sizes;
  sizes.reserve(tensors.size());
  std::unordered_set<std::string_view> names;
  for (const safetensors::TensorSpec& spec : tensors) {
    // Caught here, as tensors that land in different files never meet in one layout.
    if (!names.insert(spec.name).second) {
      throw Error(ErrorCode::kDuplicateTensor, fmt::format("tensor '{}' is given twice", spec.name));
    }
    sizes.push_back(spec_bytes(spec));
  }
  std::vector<std::vector<size_t>> groups = split_into_shards(sizes, max_shard_size);
  if (groups.empty()) groups.emplace_back();  // no tensors still makes one (empty) file

  HfFolderPlan result;
  const bool single = groups.size() == 1;
  if (!single) result.index_.emplace();
  uint64_t total_size = 0;
  uint64_t total_parameters = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::string name = single ? std::string(kHfSingleFileName) : hf_shard_file_name(g, groups.size());
    std::vector<safetensors::TensorSpec> specs;
    specs.reserve(groups[g].size());
    for (const size_t i : groups[g]) {
      specs.push_back(tensors[i]);
      total_size = checked_add(total_size, sizes[i], "total size");
      total_parameters = checked_add(total_parameters, spec_elements(tensors[i]), "total parameters");
      if (!single) result.index_->weight_map.emplace(tensors[i].name, name);
    }
    result.files_.push_back({std::move(name), safetensors::FileLayout::plan(std::move(specs), metadata)});
  }
  if (!single) {
    result.index_->total_size = total_size;
    result.index_->total_parameters = total_parameters;
  }
  return result;
}

uint64_t HfFolderPlan::total_file_bytes() const {
  uint64_t total = 0;
  for (const File& file : files_) total = checked_add(total, file.layout.file_size(), "folder size");
  return total;
}

}  // namespace reshard::formats_detail
