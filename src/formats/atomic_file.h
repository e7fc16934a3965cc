// Local files that appear at their final path complete or not at all, written
// at any offsets by several writers (PositionalWriter, checkpoint data files):
// a temporary sibling whose name every process derives alike, fsynced and
// renamed into place by one committer. A file written front to back by one
// writer goes through the storage layer instead (storage/object_writer.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>

#include "reshard/storage/location.h"

namespace reshard::formats_detail {

// Where a file is written before commit: ".<name>.tmp-reshard" beside it.
// Derived from the name alone, so every process finds the same one.
std::filesystem::path temporary_sibling(const std::filesystem::path& final_path);

// A temporary sibling open for writing. I/O failures (ENOSPC, EIO, short
// writes, a missing or read-only folder) throw Error(kIo) naming the file.
class AtomicFile {
 public:
  // Creates (or truncates) the temporary sibling of `final_path`. This object
  // owns it: it removes it on destruction unless commit() ran.
  static AtomicFile create(const std::filesystem::path& final_path);
  // Opens the temporary sibling another object or process created, to write
  // into it. Never removes or commits it.
  static AtomicFile join(const std::filesystem::path& final_path);

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  // Appends at the current position (sequential writers). Every
  // kWritebackBytes appended, the kernel is asked to start writing them to
  // storage (where it can): the disk then works while the writer produces
  // the rest, and the fsync at commit has only the tail left to wait for.
  void write(std::span<const std::byte> bytes);
  static constexpr uint64_t kWritebackBytes = uint64_t{16} << 20;
  // Writes at `offset`; safe from many threads at once on disjoint ranges.
  void write_at(uint64_t offset, std::span<const std::byte> bytes) const;
  // Sizes the file to `size` bytes, reserving the space where the file system
  // can so that a full disk fails here rather than halfway.
  void reserve(uint64_t size);
  // Flushes this descriptor's writes to storage (fsync).
  void sync() const;
  // Owner only: fsync, close, rename over the final path, fsync the folder.
  void commit();
  // Owner: closes and removes the temporary. Joined: just closes. Idempotent.
  void abandon() noexcept;

  const std::filesystem::path& final_path() const { return final_path_; }
  const std::filesystem::path& temporary_path() const { return temporary_path_; }
  bool is_owner() const { return owner_; }

 private:
  AtomicFile(std::filesystem::path final_path, int fd, bool owner);

  // Asks the kernel to start writing what write() appended since the last call.
  void start_writeback();

  std::filesystem::path final_path_;
  std::filesystem::path temporary_path_;
  int fd_ = -1;
  bool owner_ = false;
  uint64_t appended_ = 0;        // bytes write() has appended
  uint64_t writeback_from_ = 0;  // where the appended bytes not yet sent to storage start
};

// Writes `bytes` as the whole of `where`, a local file or an object, appearing
// whole or not at all (the store's write_all: for a local file a temporary
// sibling, fsync, rename). Missing folders on the way are created.
void write_file_atomically(const storage::Location& where, std::string_view bytes);

}  // namespace reshard::formats_detail
