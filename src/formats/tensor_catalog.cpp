#include "reshard/formats/tensor_catalog.h"

#include <algorithm>

#include <fmt/format.h>

#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard {

using layout_detail::checked_add;

TensorCatalog::TensorCatalog(std::vector<safetensors::File> files,
                             std::vector<std::string> file_names)
    : files_(std::move(files)), file_names_(std::move(file_names)) {
  if (files_.size() != file_names_.size()) {
    throw Error(ErrorCode::kInvalidArgument, "TensorCatalog: one name per file is needed");
  }
  for (size_t f = 0; f < files_.size(); ++f) {
    for (const safetensors::TensorInfo& info : files_[f].tensors()) {
      const auto [it, inserted] = by_name_.emplace(info.name, entries_.size());
      if (!inserted) {
        throw Error(ErrorCode::kDuplicateTensor,
                    fmt::format("tensor '{}' is in both {} and {}", info.name,
                                file_names_[entries_[it->second].file], file_names_[f]));
      }
      entries_.push_back({f, &info});
    }
  }
}

const TensorCatalog::Entry* TensorCatalog::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

std::optional<safetensors::Metadata> TensorCatalog::metadata() const {
  std::optional<safetensors::Metadata> merged;
  for (const safetensors::File& file : files_) {
    if (!file.metadata()) continue;
    if (!merged) merged.emplace();
    for (const auto& [key, value] : *file.metadata()) {
      const bool known = std::any_of(merged->begin(), merged->end(),
                                     [&name = key](const auto& entry) { return entry.first == name; });
      if (!known) merged->emplace_back(key, value);
    }
  }
  return merged;
}

uint64_t TensorCatalog::total_bytes() const {
  uint64_t total = 0;
  for (const Entry& entry : entries_) total = checked_add(total, entry.info->byte_size(), "total bytes");
  return total;
}

uint64_t TensorCatalog::total_elements() const {
  uint64_t total = 0;
  for (const Entry& entry : entries_) {
    total = checked_add(total, static_cast<uint64_t>(entry.info->elements()), "total elements");
  }
  return total;
}

}  // namespace reshard
