#include "demo/demo_files.h"

#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "layout/checked.h"
#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"

namespace reshard::demo {

using layout_detail::checked_add;

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string read_range(const fs::path& path, uint64_t offset, uint64_t size) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (!in || static_cast<uint64_t>(in.gcount()) != size) {
    throw Error(ErrorCode::kIo, fmt::format("{}: cannot read {} bytes at offset {}", path.string(), size, offset));
  }
  return bytes;
}

uint64_t file_size_of(const fs::path& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw Error(ErrorCode::kIo, fmt::format("{}: {}", path.string(), ec.message()));
  return static_cast<uint64_t>(size);
}

// Adds the tensors of one safetensors file to `folder`.
void read_file_header(const fs::path& path, StoredFolder& folder) {
  const uint64_t file_size = file_size_of(path);
  const std::string length_bytes = read_range(path, 0, 8);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i)
    header_size = (header_size << 8) | static_cast<unsigned char>(length_bytes[static_cast<size_t>(i)]);
  const uint64_t data_start = checked_add(uint64_t{8}, header_size, "safetensors header length");
  if (data_start > file_size) {
    throw Error(file_rule::kInvalidOffset,
                fmt::format("{}: header of {} bytes in a file of {}", path.string(), header_size, file_size));
  }
  Json header;
  try {
    header = Json::parse(read_range(path, 8, header_size));
  } catch (const Json::exception& e) {
    throw Error(file_rule::kInvalidHeaderJson, fmt::format("{}: {}", path.string(), e.what()));
  }
  folder.metadata.emplace_back(path, header.contains("__metadata__") ? header["__metadata__"].dump() : "null");
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      StoredTensor t;
      t.dtype = info.at("dtype").get<std::string>();
      t.shape = info.at("shape").get<std::vector<int64_t>>();
      const auto offsets = info.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > file_size - data_start) {
        throw Error(file_rule::kInvalidOffset, "data_offsets outside the file");
      }
      t.file = path;
      t.offset = data_start + offsets[0];
      t.size = offsets[1] - offsets[0];
      if (!folder.tensors.emplace(name, std::move(t)).second) {
        throw Error(ErrorCode::kDuplicateTensor, "stored in two files");
      }
    } catch (const Json::exception& e) {
      throw Error(file_rule::kInvalidHeaderJson, fmt::format("{}: tensor {}: {}", path.string(), name, e.what()));
    } catch (const Error& e) {
      throw e.with_context(fmt::format("{}: tensor {}", path.string(), name));
    }
  }
}

}  // namespace

StoredFolder read_stored_folder(const fs::path& folder, std::string_view single_file, std::string_view index_file) {
  StoredFolder stored;
  const fs::path index = folder / index_file;
  if (!fs::exists(index)) {
    read_file_header(folder / single_file, stored);
    return stored;
  }
  Json weight_map;
  try {
    weight_map = Json::parse(read_text_file(index)).at("weight_map");
  } catch (const Json::exception& e) {
    throw Error(file_rule::kInvalidIndex, fmt::format("{}: {}", index.string(), e.what()));
  }
  std::set<std::string> files;
  for (const auto& [name, file] : weight_map.items()) files.insert(file.get<std::string>());
  for (const std::string& file : files) read_file_header(folder / file, stored);
  for (const auto& [name, file] : weight_map.items()) {
    const auto it = stored.tensors.find(name);
    if (it == stored.tensors.end() || it->second.file.filename() != file.get<std::string>()) {
      throw Error(file_rule::kInvalidIndex,
                  fmt::format("{}: tensor {} is not in {}", index.string(), name, file.get<std::string>()));
    }
  }
  if (stored.tensors.size() != weight_map.size()) {
    throw Error(file_rule::kInvalidIndex, fmt::format("{}: the files hold {} tensors, the index lists {}",
                                                      index.string(), stored.tensors.size(), weight_map.size()));
  }
  return stored;
}

std::string read_stored_bytes(const StoredTensor& tensor) {
  return read_range(tensor.file, tensor.offset, tensor.size);
}

std::string read_text_file(const fs::path& path) { return read_range(path, 0, file_size_of(path)); }

}  // namespace reshard::demo
