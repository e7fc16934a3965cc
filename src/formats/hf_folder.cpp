#include "reshard/formats/hf_folder.h"


#include <fmt/format.h>

#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"

namespace reshard {
namespace {

using storage::Location;

// Real indexes are kilobytes; this bounds what a hostile one can make us read.
constexpr uint64_t kMaxIndexBytes = 100'000'000;

bool is_file(const Location& where) { return storage::open_store(where)->stat(where).has_value(); }

HfFolder open_single(HfFolderKind kind, const Location& folder, std::string_view file_name,
                     safetensors::ReadMode mode) {
  HfFolder result;
  result.kind = kind;
  result.folder = folder;
  std::vector<safetensors::File> files{safetensors::File::open(folder.child(file_name), mode)};
  result.catalog = TensorCatalog(std::move(files), {std::string(file_name)});
  return result;
}

HfFolder open_indexed(const Location& folder, safetensors::ReadMode mode) {
  HfFolder result;
  result.kind = HfFolderKind::kIndexed;
  result.folder = folder;
  result.index = read_hf_index(folder.child(kHfIndexFileName));
  std::vector<std::string> names = result.index->file_names();
  std::vector<safetensors::File> files;
  files.reserve(names.size());
  for (const std::string& name : names) files.push_back(safetensors::File::open(folder.child(name), mode));
  check_index_matches_files(*result.index, folder, files);
  result.catalog = TensorCatalog(std::move(files), std::move(names));
  return result;
}

}  // namespace

std::optional<HfFolderKind> HfFolder::detect(const Location& folder) {
  if (is_file(folder.child(kHfSingleFileName))) return HfFolderKind::kSingleFile;
  if (is_file(folder.child(kHfIndexFileName))) return HfFolderKind::kIndexed;
  if (is_file(folder.child(kPeftAdapterFileName))) return HfFolderKind::kPeftAdapter;
  return std::nullopt;
}

HfFolder HfFolder::open(const Location& folder, safetensors::ReadMode mode) {
  const std::optional<HfFolderKind> kind = detect(folder);
  if (!kind) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("{}: not a Hugging Face model or PEFT adapter folder (no {}, {} or {}); "
                            "reshard checkpoints are not supported yet",
                            folder.str(), kHfSingleFileName, kHfIndexFileName,
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

HfIndex read_hf_index(const Location& where) {
  const std::string label = where.str();
  const std::shared_ptr<storage::Store> store = storage::open_store(where);
  const std::optional<storage::ObjectInfo> info = store->stat(where);
  if (!info) throw Error(ErrorCode::kIo, fmt::format("{}: cannot read: no such file", label));
  if (info->size > kMaxIndexBytes) {
    throw Error(file_rule::kInvalidIndex,
                fmt::format("{}: {} bytes, more than an index may hold ({})", label, info->size, kMaxIndexBytes));
  }
  return parse_hf_index(store->read_all(where, kMaxIndexBytes), label);
}

void check_index_matches_files(const HfIndex& index, const Location& folder,
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
                              folder.child(file_name).str(), tensor, kHfIndexFileName));
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
                                                          folder.child(names[i]).str(), info.name, where));
      }
    }
  }
}

}  // namespace reshard
