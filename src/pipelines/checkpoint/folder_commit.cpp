#include "pipelines/checkpoint/folder_commit.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include <fmt/format.h>

#include "formats/atomic_file.h"
#include "reshard/formats/checkpoint_manifest.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

using formats_detail::write_file_atomically;

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail_io(std::string_view what, const fs::path& path, int error) {
  throw Error(ErrorCode::kIo, fmt::format("{} {}: {}", what, path.string(), std::strerror(error)));
}

void fsync_folder(const fs::path& folder) {
  const fs::path name = folder.empty() ? fs::path(".") : folder;
  const int fd = ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_io("opening folder", name, errno);
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0 && error != EINVAL && error != EROFS) fail_io("syncing folder", name, error);
}

// renameat2(RENAME_EXCHANGE): both names stay taken throughout, so a reader
// sees the old checkpoint or the new one, never neither.
bool exchange(const fs::path& a, const fs::path& b) {
  const long result = ::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE);
  if (result == 0) return true;
  if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) return false;
  fail_io("exchanging the checkpoint folder with", b, errno);
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail_io(fmt::format("renaming {} to", from.string()), to, errno);
}

// ".NAME" + suffix, built step by step (GCC 12 warns falsely on a + chain).
std::string hidden_name(const fs::path& folder, std::string_view suffix) {
  std::string name = ".";
  name += folder.filename().string();
  name += suffix;
  return name;
}

}  // namespace

fs::path normalized_folder(const fs::path& path) {
  fs::path normal = path.lexically_normal();
  if (!normal.has_filename() && normal.has_parent_path()) normal = normal.parent_path();
  return normal;
}

fs::path staging_folder_for(const fs::path& final_path) {
  const fs::path final_folder = normalized_folder(final_path);
  if (final_folder.filename().empty() || final_folder.filename() == "." || final_folder.filename() == "..") {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: not a folder name to save to", final_path.string()));
  }
  return final_folder.parent_path() / hidden_name(final_folder, ".tmp-reshard-ckpt");
}

namespace {

// A folder cannot be made where an ancestor is a file: say so, naming the file,
// rather than failing later on a path under it ("Not a directory").
void refuse_file_ancestor(const fs::path& final_folder) {
  std::error_code ec;
  for (fs::path ancestor = final_folder.parent_path(); !ancestor.empty(); ancestor = ancestor.parent_path()) {
    const fs::file_status status = fs::status(ancestor, ec);
    if (status.type() == fs::file_type::not_found) {
      if (ancestor == ancestor.parent_path()) return;
      continue;
    }
    if (status.type() != fs::file_type::directory) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: cannot save there: {} is a file, not a folder",
                                                           final_folder.string(), ancestor.string()));
    }
    return;
  }
}

}  // namespace

void prepare_staging(const fs::path& final_path, bool replace) {
  const fs::path final_folder = normalized_folder(final_path);
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(final_folder, ec);
  if (status.type() == fs::file_type::directory) {
    const bool empty = fs::is_empty(final_folder, ec);
    if (!empty && !checkpoint::is_checkpoint(final_folder)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: exists and is not a checkpoint: refusing to replace it", final_folder.string()));
    }
    if (!empty && !replace) {
      throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: a checkpoint is already there", final_folder.string()));
    }
  } else if (status.type() != fs::file_type::not_found) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: exists and is not a folder", final_folder.string()));
  }
  refuse_file_ancestor(final_folder);
  const fs::path staging = staging_folder_for(final_folder);
  fs::remove_all(staging, ec);
  if (ec) throw Error(ErrorCode::kIo, fmt::format("{}: cannot remove: {}", staging.string(), ec.message()));
  if (!final_folder.parent_path().empty()) fs::create_directories(final_folder.parent_path(), ec);
  if (::mkdir(staging.c_str(), 0755) != 0) fail_io("creating", staging, errno);
}

void commit_staging(const fs::path& final_path, std::string_view manifest_bytes) {
  const fs::path final_folder = normalized_folder(final_path);
  const fs::path staging = staging_folder_for(final_folder);
  write_file_atomically(staging / checkpoint::kManifestFileName, manifest_bytes);
  fsync_folder(staging);
  std::error_code ec;
  const fs::path parent = final_folder.parent_path();
  if (!fs::exists(fs::symlink_status(final_folder, ec))) {
    rename_or_throw(staging, final_folder);
    fsync_folder(parent);
    return;
  }
  if (exchange(staging, final_folder)) {
    fsync_folder(parent);
    fs::remove_all(staging, ec);  // the old checkpoint, now under the staging name
    return;
  }
  // No exchange on this file system: move the old one aside first.
  const fs::path old = parent / hidden_name(final_folder, ".old-reshard-ckpt");
  fs::remove_all(old, ec);
  rename_or_throw(final_folder, old);
  rename_or_throw(staging, final_folder);
  fsync_folder(parent);
  fs::remove_all(old, ec);
}

void abandon_staging(const fs::path& final_path) noexcept {
  try {
    std::error_code ec;
    fs::remove_all(staging_folder_for(final_path), ec);
  } catch (...) {
  }
}

}  // namespace reshard::pipelines_detail
