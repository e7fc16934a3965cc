// The demo's own reading of the folders an export writes: safetensors headers
// and bytes parsed here from the format's definition (8-byte little-endian
// header length, JSON header, data), so the check does not trust the
// library's reader to read what its writer wrote.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace reshard::demo {

// Where one tensor's bytes are, as its file's header says.
struct StoredTensor {
  std::string dtype;  // "BF16", "F32", ...
  std::vector<int64_t> shape;
  std::filesystem::path file;
  uint64_t offset = 0;  // from the start of the file
  uint64_t size = 0;
};

struct StoredFolder {
  std::map<std::string, StoredTensor> tensors;
  // Each weight file and its "__metadata__" (as JSON text, "null" when absent).
  std::vector<std::pair<std::filesystem::path, std::string>> metadata;
};

// The tensors of `folder`: those of `single_file` (model.safetensors,
// adapter_model.safetensors) or, when `index_file` exists, of every file its
// weight_map names (each tensor must be in the file the index says).
// Error(kIo) for a file that cannot be read, kInvalidHeaderJson,
// kInvalidOffset for a header that does not describe the file.
StoredFolder read_stored_folder(const std::filesystem::path& folder, std::string_view single_file,
                                std::string_view index_file);

// The tensor's bytes.
std::string read_stored_bytes(const StoredTensor& tensor);

// The whole file as text.
std::string read_text_file(const std::filesystem::path& path);

}  // namespace reshard::demo
