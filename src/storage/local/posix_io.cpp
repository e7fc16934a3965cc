#include "storage/local/posix_io.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::storage_detail {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

int UniqueFd::release() noexcept { return std::exchange(fd_, -1); }

void fail_io(std::string_view action, const std::filesystem::path& path, int error) {
  throw Error(ErrorCode::kIo, fmt::format("{} {}: {}", action, path.string(), std::strerror(error)));
}

UniqueFd open_file(const std::filesystem::path& path, int flags, std::string_view action) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) fail_io(action, path, errno);
  return UniqueFd(fd);
}

void pread_exactly(int fd, uint64_t offset, std::span<std::byte> out, const std::filesystem::path& path) {
  while (!out.empty()) {
    if (offset > static_cast<uint64_t>(INT64_MAX)) fail_io("reading", path, EOVERFLOW);
    const ssize_t n = ::pread(fd, out.data(), out.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_io("reading", path, errno);
    if (n == 0) {
      throw Error(ErrorCode::kIo, fmt::format("reading {}: the file ends at byte {}, before the {} bytes asked for",
                                              path.string(), offset, out.size()));
    }
    out = out.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
}

void pwrite_exactly(int fd, uint64_t offset, std::span<const std::byte> bytes, const std::filesystem::path& path) {
  while (!bytes.empty()) {
    if (offset > static_cast<uint64_t>(INT64_MAX) - bytes.size()) fail_io("writing", path, EFBIG);
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_io("writing", path, errno);
    if (n == 0) fail_io("writing", path, EIO);
    bytes = bytes.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
}

void fsync_file(int fd, const std::filesystem::path& path) {
  if (::fsync(fd) != 0) fail_io("syncing", path, errno);
}

void fsync_folder(const std::filesystem::path& folder) {
  const std::filesystem::path name = folder.empty() ? std::filesystem::path(".") : folder;
  const int fd = ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // some file systems refuse to open folders
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0 && error != EINVAL && error != EROFS) fail_io("syncing folder", name, error);
}

void rename_file(const std::filesystem::path& from, const std::filesystem::path& to, bool no_replace) {
  if (!no_replace) {
    if (::rename(from.c_str(), to.c_str()) != 0) fail_io("renaming into place", to, errno);
    return;
  }
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return;
  int error = errno;
  if (error == EINVAL || error == ENOSYS) {
    // A file system without RENAME_NOREPLACE: link() refuses an existing name too.
    if (::link(from.c_str(), to.c_str()) == 0) {
      ::unlink(from.c_str());
      return;
    }
    error = errno;
  }
  if (error == EEXIST) {
    throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists", to.string()));
  }
  fail_io("renaming into place", to, error);
}

bool exchange_paths(const std::filesystem::path& a, const std::filesystem::path& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return true;
  const int error = errno;
  if (error == EINVAL || error == ENOSYS || error == EOPNOTSUPP) return false;
  fail_io("swapping into place", b, error);
}

void start_writeback(int fd, uint64_t offset, uint64_t length) noexcept {
  if (offset > static_cast<uint64_t>(INT64_MAX) || length > static_cast<uint64_t>(INT64_MAX) - offset) return;
  (void)::sync_file_range(fd, static_cast<off_t>(offset), static_cast<off_t>(length), SYNC_FILE_RANGE_WRITE);
}

}  // namespace reshard::storage_detail
