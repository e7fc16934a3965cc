// The tensors of several validated safetensors files, listed together and found by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "reshard/formats/safetensors_reader.h"

namespace reshard {

// Every tensor of a model's files. Tensors are listed file by file, in data
// order within each file: the "source order" in which converters write them.
class TensorCatalog {
 public:
  // A tensor and the file that holds it.
  struct Entry {
    size_t file = 0;                                   // index into files()
    const safetensors::TensorInfo* info = nullptr;     // owned by that file
  };

  TensorCatalog() = default;
  // Lists the tensors of `files`, named `file_names` (as shown to users, e.g.
  // relative to the folder). Throws Error(kDuplicateTensor) when two files hold
  // the same tensor, naming both files.
  TensorCatalog(std::vector<safetensors::File> files, std::vector<std::string> file_names);

  std::span<const safetensors::File> files() const { return files_; }
  const std::string& file_name(size_t file) const { return file_names_.at(file); }
  const safetensors::File& file_of(const Entry& entry) const { return files_.at(entry.file); }

  // Every tensor in source order.
  std::span<const Entry> tensors() const { return entries_; }
  // The tensor called `name`, or nullptr.
  const Entry* find(std::string_view name) const;

  // The files' `__metadata__` merged in file order (the first value of a key
  // wins); nullopt when no file has any.
  std::optional<safetensors::Metadata> metadata() const;
  // Sum of tensor bytes and of element counts, overflow-checked.
  uint64_t total_bytes() const;
  uint64_t total_elements() const;

 private:
  std::vector<safetensors::File> files_;
  std::vector<std::string> file_names_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string_view, size_t> by_name_;  // views into the files' headers
};

}  // namespace reshard
