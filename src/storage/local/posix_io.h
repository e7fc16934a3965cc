// The POSIX calls under the local store, each retrying EINTR and finishing
// short transfers, and throwing Error(kIo) that names the file and the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>

namespace reshard::storage_detail {

// A file descriptor that closes itself.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  int release() noexcept;

 private:
  int fd_ = -1;
};

[[noreturn]] void fail_io(std::string_view action, const std::filesystem::path& path, int error);

UniqueFd open_file(const std::filesystem::path& path, int flags, std::string_view action);
void pread_exactly(int fd, uint64_t offset, std::span<std::byte> out, const std::filesystem::path& path);
void pwrite_exactly(int fd, uint64_t offset, std::span<const std::byte> bytes, const std::filesystem::path& path);
void fsync_file(int fd, const std::filesystem::path& path);
// Makes a rename or an unlink in `folder` durable (some file systems cannot
// sync a folder: that is no error).
void fsync_folder(const std::filesystem::path& folder);
// Renames `from` over `to`; with `no_replace`, Error(kAlreadyExists) when `to`
// exists (checked by the kernel, atomically, where the file system can).
void rename_file(const std::filesystem::path& from, const std::filesystem::path& to, bool no_replace);
// Swaps `a` and `b` (files or folders, both existing) in one step
// (renameat2 RENAME_EXCHANGE): a reader sees one or the other, never neither.
// False when the file system (or kernel) cannot; Error(kIo) for other failures.
bool exchange_paths(const std::filesystem::path& a, const std::filesystem::path& b);
// Asks the kernel to start writing [offset, offset + length) of the file to
// storage, without waiting (sync_file_range). A file system that cannot is no
// error: the fsync at commit writes everything anyway.
void start_writeback(int fd, uint64_t offset, uint64_t length) noexcept;

}  // namespace reshard::storage_detail
