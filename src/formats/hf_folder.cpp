#include "reshard/formats/hf_folder.h"

#include <fstream>
#include <system_error>

#include <fmt/format.h>

#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;

// Real indexes are kilobytes; this bounds what a hostile one can make us read.
constexpr uintmax_t kMaxIndexBytes = 100'000'000;

bool is_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

HfFolder open_single(HfFolderKind kind, const fs::path& folder, std::string_view file_name,
                     safetensors::ReadMode mode) {
  HfFolder result;
  result.kind = kind;
  result.folder = folder;
  std::vector<safetensors::File> files{safetensors::File::open(folder / file_name, mode)};
  result.catalog = TensorCatalog(std::move(files), {std::string(file_name)});
  return result;
}

HfFolder open_indexed(const fs::path& folder, safetensors::ReadMode mode) {
  HfFolder result;
  result.kind = HfFolderKind::kIndexed;
  result.folder = folder;
  result.index = read_hf_index(folder / kHfIndexFileName);
  std::vector<std::string> names = result.index->file_names();
  std::vector<safetensors::File> files;
  files.reserve(names.size());
  for (const std::string& name : names) files.push_back(safetensors::File::open(folder / name, mode));
  check_index_matches_files(*result.index, folder, files);
  result.catalog = TensorCatalog(std::move(files), std::move(names));
  return result;
}

}  // namespace

std::optional<HfFolderKind> HfFolder::detect(const fs::path& folder) {
  if (is_file(folder / kHfSingleFileName)) return HfFolderKind::kSingleFile;
  if (is_file(folder / kHfIndexFileName)) return HfFolderKind::kIndexed;
  if (is_file(folder / kPeftAdapterFileName)) return HfFolderKind::kPeftAdapter;
  return std::nullopt;
}

HfFolder HfFolder::open(const fs::path& folder, safetensors::ReadMode mode) {
  const std::optional<HfFolderKind> kind = detect(folder);
  if (!kind) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("{}: not a Hugging Face model or PEFT adapter folder (no {}, {} or {}); "
                            "reshard checkpoints are not supported yet",
                            folder.string(), kHfSingleFileName, kHfIndexFileName,
                            kPeftAdapterFileName));
  }
  switch (*kind) {
    case HfFolderKind::kSingleFile:
      return open_single(*kind, folder, kHfSingleFileName, mode);
    case HfFolderKind::kPeftAdapter:
      return open_single(*kind, folder, kPeftAdapterFileName, mode);
    case HfFolderKind::kIndexed:
      break;
  }
  return open_indexed(folder, mode);
}

HfIndex read_hf_index(const fs::path& path) {
  const std::string label = path.string();
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw Error(ErrorCode::kIo, fmt::format("{}: cannot read: {}", label, ec.message()));
  if (size > kMaxIndexBytes) {
    throw Error(file_rule::kInvalidIndex,
                fmt::format("{}: {} bytes, more than an index may hold ({})", label, size, kMaxIndexBytes));
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!in || in.gcount() != static_cast<std::streamsize>(bytes.size())) {
    throw Error(ErrorCode::kIo, fmt::format("{}: cannot read", label));
  }
  return parse_hf_index(bytes, label);
}

void check_index_matches_files(const HfIndex& index, const fs::path& folder,
                               std::span<const safetensors::File> files) {
  const std::vector<std::string> names = index.file_names();
  if (names.size() != files.size()) {
    throw Error(ErrorCode::kInvalidArgument, "check_index_matches_files: one file per index file name");
  }
  std::unordered_map<std::string_view, const safetensors::File*> by_name;
  for (size_t i = 0; i < names.size(); ++i) by_name.emplace(names[i], &files[i]);

  for (const auto& [tensor, file_name] : index.weight_map) {
    if (by_name.at(file_name)->find(tensor) == nullptr) {
      throw Error(ErrorCode::kMissingTensor,
                  fmt::format("{}: tensor '{}' is listed in {} but missing from the file",
                              (folder / file_name).string(), tensor, kHfIndexFileName));
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    for (const safetensors::TensorInfo& info : files[i].tensors()) {
      const auto listed = index.weight_map.find(info.name);
      if (listed == index.weight_map.end() || listed->second != names[i]) {
        const std::string where = listed == index.weight_map.end()
                                      ? std::string("is not listed in ") + std::string(kHfIndexFileName)
                                      : fmt::format("is listed in {} for {}", kHfIndexFileName, listed->second);
        throw Error(file_rule::kInvalidIndex, fmt::format("{}: tensor '{}' is in the file but {}",
                                                          (folder / names[i]).string(), info.name, where));
      }
    }
  }
}

}  // namespace reshard
