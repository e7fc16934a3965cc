#include "formats/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"

namespace reshard::formats_detail {
namespace {

[[noreturn]] void fail_io(std::string_view action, const std::filesystem::path& path, int error) {
  throw Error(ErrorCode::kIo, fmt::format("{} {}: {}", action, path.string(), std::strerror(error)));
}

int open_or_throw(const std::filesystem::path& path, int flags, std::string_view action) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) fail_io(action, path, errno);
  return fd;
}

void fsync_folder(const std::filesystem::path& file) {
  std::filesystem::path folder = file.parent_path();
  if (folder.empty()) folder = ".";
  const int fd = open_or_throw(folder, O_RDONLY | O_DIRECTORY, "opening folder");
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  // Some file systems cannot sync a folder; the rename itself has happened.
  if (result != 0 && error != EINVAL && error != EROFS) fail_io("syncing folder", folder, error);
}

}  // namespace

std::filesystem::path temporary_sibling(const std::filesystem::path& final_path) {
  std::filesystem::path name = final_path.filename();
  if (name.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} names a folder, not a file", final_path.string()));
  }
  std::string hidden = ".";
  hidden += name.string();
  hidden += ".tmp-reshard";
  return final_path.parent_path() / hidden;
}

AtomicFile::AtomicFile(std::filesystem::path final_path, int fd, bool owner)
    : final_path_(std::move(final_path)),
      temporary_path_(temporary_sibling(final_path_)),
      fd_(fd),
      owner_(owner) {}

AtomicFile AtomicFile::create(const std::filesystem::path& final_path) {
  const std::filesystem::path temporary = temporary_sibling(final_path);
  const int fd = open_or_throw(temporary, O_WRONLY | O_CREAT | O_TRUNC, "creating");
  return AtomicFile(final_path, fd, true);
}

AtomicFile AtomicFile::join(const std::filesystem::path& final_path) {
  const std::filesystem::path temporary = temporary_sibling(final_path);
  const int fd = open_or_throw(temporary, O_WRONLY, "opening");
  return AtomicFile(final_path, fd, false);
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : final_path_(std::move(other.final_path_)),
      temporary_path_(std::move(other.temporary_path_)),
      fd_(std::exchange(other.fd_, -1)),
      owner_(std::exchange(other.owner_, false)),
      appended_(std::exchange(other.appended_, 0)),
      writeback_from_(std::exchange(other.writeback_from_, 0)) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    abandon();
    final_path_ = std::move(other.final_path_);
    temporary_path_ = std::move(other.temporary_path_);
    fd_ = std::exchange(other.fd_, -1);
    owner_ = std::exchange(other.owner_, false);
    appended_ = std::exchange(other.appended_, 0);
    writeback_from_ = std::exchange(other.writeback_from_, 0);
  }
  return *this;
}

AtomicFile::~AtomicFile() { abandon(); }

void AtomicFile::write(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_io("writing", temporary_path_, errno);
    if (n == 0) fail_io("writing", temporary_path_, EIO);
    bytes = bytes.subspan(static_cast<size_t>(n));
    appended_ += static_cast<uint64_t>(n);
  }
  if (appended_ - writeback_from_ >= kWritebackBytes) start_writeback();
}

void AtomicFile::start_writeback() {
#if defined(__linux__)
  // Asynchronous: starts the writes, waits for none. The file's start is its
  // current size minus what write() appended (a header may precede them).
  const off_t end = ::lseek(fd_, 0, SEEK_CUR);
  if (end >= 0 && static_cast<uint64_t>(end) >= appended_) {
    const auto from = static_cast<off_t>(static_cast<uint64_t>(end) - (appended_ - writeback_from_));
    // A file system that cannot is no error: the fsync at commit does it all.
    (void)::sync_file_range(fd_, from, end - from, SYNC_FILE_RANGE_WRITE);
  }
#endif
  writeback_from_ = appended_;
}

void AtomicFile::write_at(uint64_t offset, std::span<const std::byte> bytes) const {
  while (!bytes.empty()) {
    if (offset > static_cast<uint64_t>(INT64_MAX) - bytes.size()) {
      fail_io("writing", temporary_path_, EFBIG);
    }
    const ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_io("writing", temporary_path_, errno);
    if (n == 0) fail_io("writing", temporary_path_, EIO);
    bytes = bytes.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
}

void AtomicFile::reserve(uint64_t size) {
  if (size > static_cast<uint64_t>(INT64_MAX)) fail_io("sizing", temporary_path_, EFBIG);
  const auto length = static_cast<off_t>(size);
  if (size > 0) {
    const int error = ::posix_fallocate(fd_, 0, length);
    // Where the file system cannot reserve space, a sparse file does.
    if (error != 0 && error != EOPNOTSUPP && error != EINVAL) fail_io("reserving space for", temporary_path_, error);
  }
  if (::ftruncate(fd_, length) != 0) fail_io("sizing", temporary_path_, errno);
}

void AtomicFile::sync() const {
  if (::fsync(fd_) != 0) fail_io("syncing", temporary_path_, errno);
}

void AtomicFile::commit() {
  if (fd_ < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the file was already committed or abandoned", final_path_.string()));
  }
  if (!owner_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: only the writer that created the file can commit it", final_path_.string()));
  }
  try {
    sync();
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) fail_io("closing", temporary_path_, errno);
    if (::rename(temporary_path_.c_str(), final_path_.c_str()) != 0) {
      fail_io("renaming into place", final_path_, errno);
    }
    owner_ = false;  // the temporary is gone: nothing left to remove
    fsync_folder(final_path_);
  } catch (...) {
    abandon();
    throw;
  }
}

void AtomicFile::abandon() noexcept {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (owner_) {
    ::unlink(temporary_path_.c_str());
    owner_ = false;
  }
}

void write_file_atomically(const storage::Location& where, std::string_view bytes) {
  storage::open_store(where)->write_all(where, bytes, storage::IfExists::kReplace);
}

}  // namespace reshard::formats_detail
