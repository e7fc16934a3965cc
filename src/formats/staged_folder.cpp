#include "formats/staged_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <system_error>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void io_error(const fs::path& path, std::string_view what, const std::error_code& ec) {
  throw Error(ErrorCode::kIo, fmt::format("{}: {}: {}", path.string(), what, ec.message()));
}

// "out/" and "out" name the same folder; the staging name needs the last part.
fs::path without_trailing_separator(fs::path path) {
  path = path.lexically_normal();
  if (!path.has_filename() && path.has_parent_path()) path = path.parent_path();
  return path;
}

// Makes a rename durable: the entry lives in the parent folder.
void sync_folder(const fs::path& folder) {
  const int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some file systems refuse to open folders
  ::fsync(fd);
  ::close(fd);
}

// Whether `path` may simply be renamed over: absent, or an empty folder.
bool is_absent_or_empty_folder(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(path, ec);
  if (status.type() == fs::file_type::not_found) return true;
  if (ec) io_error(path, "cannot inspect", ec);
  if (status.type() != fs::file_type::directory) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: exists and is not a folder", path.string()));
  }
  const bool empty = fs::is_empty(path, ec);
  if (ec) io_error(path, "cannot list", ec);
  return empty;
}

}  // namespace

StagedFolder::StagedFolder(fs::path final_path, bool replace)
    : final_(without_trailing_separator(std::move(final_path))) {
  merge_into_existing_ = !is_absent_or_empty_folder(final_);
  if (merge_into_existing_ && !replace) {
    throw Error(ErrorCode::kAlreadyExists,
                fmt::format("{}: already exists and is not empty (replacing it rewrites only its weight files)",
                            final_.string()));
  }
  const fs::path parent = final_.parent_path();
  std::error_code ec;
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) io_error(parent, "cannot create folder", ec);
  }
  // The process id keeps concurrent runs apart; a leftover of a dead run with
  // the same id is garbage and goes.
  staging_ = parent / fmt::format(".{}.tmp-reshard-{}", final_.filename().string(), ::getpid());
  fs::remove_all(staging_, ec);
  if (!fs::create_directory(staging_, ec) || ec) io_error(staging_, "cannot create folder", ec);
}

StagedFolder::~StagedFolder() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
}

void StagedFolder::commit(std::span<const std::string> stale, std::span<const std::string> move_order) {
  std::error_code ec;
  if (!merge_into_existing_) {
    fs::rename(staging_, final_, ec);
    if (ec) io_error(final_, "cannot move the staged folder into place", ec);
    committed_ = true;
    sync_folder(final_.parent_path());
    return;
  }
  for (const std::string& name : stale) {
    fs::remove(final_ / name, ec);
    if (ec) io_error(final_ / name, "cannot remove", ec);
  }
  for (const std::string& name : move_order) {
    fs::rename(staging_ / name, final_ / name, ec);
    if (ec) io_error(final_ / name, "cannot move into place", ec);
  }
  sync_folder(final_);
  fs::remove_all(staging_, ec);
  committed_ = true;
}

}  // namespace reshard
