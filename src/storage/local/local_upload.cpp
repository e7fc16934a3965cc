#include "storage/local/local_upload.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "storage/local/staging_name.h"
#include "storage/receipts.h"

namespace reshard::storage_detail {
namespace {

namespace fs = std::filesystem;

void reserve(int fd, uint64_t size, const fs::path& path) {
  if (size > static_cast<uint64_t>(INT64_MAX)) fail_io("sizing", path, EFBIG);
  const auto length = static_cast<off_t>(size);
  // fallocate(2), not posix_fallocate: where the file system cannot reserve
  // space, glibc's emulation would write every block once before the data
  // does; a sparse file is better there.
  if (size > 0 && ::fallocate(fd, 0, 0, length) != 0) {
    const int error = errno;
    if (error != EOPNOTSUPP && error != ENOSYS && error != EINVAL) fail_io("reserving space for", path, error);
  }
  if (::ftruncate(fd, length) != 0) fail_io("sizing", path, errno);
}

}  // namespace

LocalUpload::LocalUpload(storage::Location destination, storage::PartLayout layout, fs::path staging, UniqueFd fd,
                         bool starter, storage::IfExists if_exists)
    : destination_(std::move(destination)),
      layout_(layout),
      staging_(std::move(staging)),
      fd_(std::move(fd)),
      starter_(starter),
      if_exists_(if_exists) {}

std::unique_ptr<LocalUpload> LocalUpload::start(const storage::Location& destination,
                                                const storage::PartLayout& layout, storage::IfExists if_exists) {
  const fs::path final_path = destination.local_path();
  if (if_exists == storage::IfExists::kFail && fs::exists(fs::symlink_status(final_path))) {
    throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists", final_path.string()));
  }
  // As with objects, the folders on the way are there once something is written under them.
  if (const fs::path parent = final_path.parent_path(); !parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) fail_io("creating the folders of", final_path, ec.value());
  }
  const fs::path staging = final_path.parent_path() / new_staging_name(final_path.filename().string());
  UniqueFd fd = open_file(staging, O_RDWR | O_CREAT | O_EXCL, "creating");
  std::unique_ptr<LocalUpload> upload(
      new LocalUpload(destination, layout, staging, std::move(fd), true, if_exists));
  reserve(upload->fd_.get(), layout.object_bytes(), staging);  // on failure the destructor removes it
  return upload;
}

std::unique_ptr<LocalUpload> LocalUpload::join(const storage::Location& destination,
                                               const storage::PartLayout& layout, std::string_view handle) {
  const fs::path final_path = destination.local_path();
  if (!staging_owner(handle, final_path.filename().string())) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {:?} is not a staging file of it", final_path.string(), std::string(handle)));
  }
  const fs::path staging = final_path.parent_path() / std::string(handle);
  UniqueFd fd = open_file(staging, O_RDWR, "opening");
  return std::unique_ptr<LocalUpload>(
      new LocalUpload(destination, layout, staging, std::move(fd), false, storage::IfExists::kReplace));
}

LocalUpload::~LocalUpload() {
  if (starter_ && !done_) abort();
}

storage::PartReceipt LocalUpload::write_part(uint32_t index, std::span<const std::byte> bytes) {
  if (bytes.size() != layout_.size(index)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: part {} is {} bytes, not {}", destination_.str(),
                                                         index, layout_.size(index), bytes.size()));
  }
  pwrite_exactly(fd_.get(), layout_.offset(index), bytes, staging_);
  return storage::PartReceipt{index, ""};
}

void LocalUpload::write_at(uint64_t offset, std::span<const std::byte> bytes) {
  if (offset > layout_.object_bytes() || bytes.size() > layout_.object_bytes() - offset) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} bytes at {} pass the end of an object of {} bytes", destination_.str(),
                            bytes.size(), offset, layout_.object_bytes()));
  }
  pwrite_exactly(fd_.get(), offset, bytes, staging_);
  note_written(offset, bytes.size());
}

void LocalUpload::note_written(uint64_t offset, uint64_t length) {
  uint64_t from = 0, end = 0;
  {
    const std::lock_guard lock(writeback_mutex_);
    if (offset != sequential_end_) return;
    sequential_end_ += length;
    if (sequential_end_ - writeback_from_ < kWritebackBytes) return;
    from = std::exchange(writeback_from_, sequential_end_);
    end = sequential_end_;
  }
  start_writeback(fd_.get(), from, end - from);
}

void LocalUpload::finish_writes() { fsync_file(fd_.get(), staging_); }

void LocalUpload::complete(std::vector<storage::PartReceipt> receipts) {
  if (!starter_ || done_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: only the process that started the upload completes it, once", destination_.str()));
  }
  try {
    check_receipts(*this, receipts);
    fsync_file(fd_.get(), staging_);
    const fs::path final_path = destination_.local_path();
    rename_file(staging_, final_path, if_exists_ == storage::IfExists::kFail);
    done_ = true;
    fsync_folder(final_path.parent_path());
  } catch (...) {
    abort();
    throw;
  }
}

void LocalUpload::abort() noexcept {
  if (done_) return;
  done_ = true;
  ::unlink(staging_.c_str());
}

}  // namespace reshard::storage_detail
