#include "formats/checkpoint_folder.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "reshard/formats/checkpoint_manifest.h"
#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"

namespace reshard::formats_detail {

using checkpoint::kManifestFileName;
using checkpoint::kMaxManifestBytes;

namespace {

namespace fs = std::filesystem;

std::string read_whole_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::kIo, fmt::format("{}: cannot read", path.string()));
  return std::move(text).str();
}

[[noreturn]] void no_manifest(const storage::Location& folder) {
  throw Error(ErrorCode::kIo, fmt::format("{}: no {}: not a checkpoint, or one whose save did not finish",
                                          folder.str(), kManifestFileName));
}

}  // namespace

CheckpointFolder::CheckpointFolder(storage::Location folder) : folder_(std::move(folder)) {
  if (folder_.is_local()) return;
  store_ = storage::open_store(folder_);
  for (const storage::ListEntry& entry : store_->list(folder_)) listed_.emplace(entry.name, entry.size);
}

std::string CheckpointFolder::read_manifest() const {
  if (folder_.is_local()) {
    const fs::path folder = folder_.local_path();
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) {
      throw Error(ErrorCode::kIo, fmt::format("{}: no such checkpoint folder", folder.string()));
    }
    if (!fs::is_regular_file(folder / kManifestFileName, ec)) no_manifest(folder_);
    return read_whole_file(folder / kManifestFileName);
  }
  // A store has no folders: one is there when objects are under its prefix.
  if (listed_.empty()) throw Error(ErrorCode::kIo, fmt::format("{}: no such checkpoint folder", folder_.str()));
  if (!listed_.contains(kManifestFileName)) no_manifest(folder_);
  return store_->read_all(folder_.child(kManifestFileName), kMaxManifestBytes);
}

uint64_t CheckpointFolder::data_file_size(std::string_view name, std::string_view lost) const {
  const storage::Location file = folder_.child(name);
  if (folder_.is_local()) {
    struct stat info {};
    if (::stat(file.local_path().c_str(), &info) != 0) {
      throw Error(ErrorCode::kIo, fmt::format("{}: data file missing: {}{}", file.str(), std::strerror(errno), lost));
    }
    return static_cast<uint64_t>(info.st_size);
  }
  const auto it = listed_.find(name);
  if (it == listed_.end()) {
    throw Error(ErrorCode::kIo, fmt::format("{}: data file missing: no such object{}", file.str(), lost));
  }
  return it->second;
}

}  // namespace reshard::formats_detail
