#include "storage/local/staged_folder.h"

#include <system_error>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "storage/local/folder_copy.h"
#include "storage/local/posix_io.h"
#include "storage/local/staging_name.h"

namespace reshard::storage_detail {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void io_error(const fs::path& path, std::string_view what, const std::error_code& ec) {
  throw Error(ErrorCode::kIo, fmt::format("{}: {}: {}", path.string(), what, ec.message()));
}

// "out/" and "out" name the same folder; the staging name needs its last
// part, which "." and ".." do not give.
fs::path folder_name(fs::path path) {
  path = path.lexically_normal();
  if (!path.has_filename() && path.has_parent_path()) path = path.parent_path();
  if (path.filename() == "." || path.filename() == "..") path = fs::absolute(path).lexically_normal();
  if (!path.has_filename() && path.has_parent_path()) path = path.parent_path();
  return path;
}

// Whether `path` may simply be renamed over: absent, or an empty folder.
bool is_absent_or_empty_folder(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(path, ec);
  if (status.type() == fs::file_type::not_found) return true;
  if (ec) io_error(path, "cannot inspect", ec);
  if (status.type() != fs::file_type::directory) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: exists and is not a folder", path.string()));
  }
  const bool empty = fs::is_empty(path, ec);
  if (ec) io_error(path, "cannot list", ec);
  return empty;
}

}  // namespace

StagedFolder::StagedFolder(fs::path final_path, bool replace) : final_(folder_name(std::move(final_path))) {
  replace_existing_ = !is_absent_or_empty_folder(final_);
  if (replace_existing_ && !replace) {
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
  remove_dead_stagings(final_);
  staging_ = parent / new_staging_name(final_.filename().string());
  if (!fs::create_directory(staging_, ec) || ec) io_error(staging_, "cannot create folder", ec);
}

StagedFolder::~StagedFolder() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
}

void StagedFolder::commit(std::span<const std::string> stale, std::span<const std::string> move_order) {
  if (committed_) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: the folder was already committed", final_.string()));
  }
  fsync_folder(staging_);
  if (!replace_existing_) {
    rename_file(staging_, final_, false);  // over an empty folder too: rename(2) replaces one
    committed_ = true;
    fsync_folder(final_.parent_path());
    return;
  }
  link_entries_into(final_, staging_, stale);
  if (!exchange_paths(staging_, final_)) {
    commit_file_by_file(stale, move_order);
    return;
  }
  committed_ = true;
  fsync_folder(final_.parent_path());
  std::error_code ignored;
  fs::remove_all(staging_, ignored);  // the old folder; what stays is removed by the next writer
}

void StagedFolder::commit_file_by_file(std::span<const std::string> stale, std::span<const std::string> move_order) {
  std::error_code ec;
  for (const std::string& name : stale) {
    fs::remove(final_ / name, ec);
    if (ec) io_error(final_ / name, "cannot remove", ec);
  }
  for (const std::string& name : move_order) rename_file(staging_ / name, final_ / name, false);
  fsync_folder(final_);
  fs::remove_all(staging_, ec);
  committed_ = true;
}

}  // namespace reshard::storage_detail
