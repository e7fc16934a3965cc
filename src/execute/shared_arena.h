// SharedArena: large buffers in one shared memory file, so that processes of a host can map each other's shards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>

namespace reshard::execute_detail {

// A process's large buffers, in one memory file (memfd) mapped at one place.
// A peer process on the same host that may attach to this one (the same
// ptrace permission as a cross-memory copy) takes a duplicate of the file's
// descriptor (pidfd_getfd), maps the whole file read-only once, and from then
// on reads any of our shards with ordinary loads: a strided message costs one
// copy in user space, at memory speed, instead of a gather into a staging
// buffer plus a kernel copy (whose work per run makes short runs slow).
//
// The file is reserved at its full size up front and never shrinks, so a
// peer's mapping stays valid for its whole life (no SIGBUS). Freed ranges are
// kept populated, up to a bound, for the next buffer of the same size (a
// training step's arrays come back with the same shapes): a fresh range
// costs a fault and a zeroed page per 4 KiB in this process, and another
// fault per page in each peer that reads it. Beyond the bound the oldest kept
// ranges are punched out of the file, which returns their pages to the kernel
// in every process that maps them. The mapping is not inherited by fork(): a child
// would otherwise share, and could silently change, its parent's buffers.
class SharedArena {
 public:
  // Allocations smaller than this stay on the heap: their messages are short
  // and a gather costs them little.
  static constexpr size_t kMinBytes = size_t{64} << 10;
  // The first page holds a token for peers to check their mapping against.
  static constexpr size_t kTokenBytes = 16;

  // An arena of `reserve` bytes (rounded up to the allocation granularity)
  // keeping at most `max_kept_bytes` of freed ranges populated. Throws
  // Error(kIo) where the system refuses the file or the mapping.
  SharedArena(uint64_t reserve, uint64_t max_kept_bytes);
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  // The process's arena, made on first use and reserving as much as the
  // host's memory; null where the system refuses it.
  static SharedArena* for_process();
  // From now on (for the rest of the process) Buffer::allocate takes buffers
  // of kMinBytes or more from the process's arena, while it has room. The MPI
  // transport turns this on once some peer of the host maps our arena.
  static void serve_allocations();
  static bool serving_allocations();

  // `bytes` of writable memory, 64 KiB aligned (2 MiB from 4 MiB on), or
  // null when the arena has no free range that large. Uninitialised: a kept
  // range still holds its last buffer's bytes.
  std::byte* allocate(size_t bytes);
  // Gives back what allocate(bytes) returned: kept for reuse, or its pages
  // back to the kernel.
  void release(std::byte* data, size_t bytes) noexcept;

  // Whether [data, data + bytes) lies inside the arena.
  bool contains(const void* data, uint64_t bytes) const;

  int fd() const { return fd_; }
  uint64_t base_address() const { return reinterpret_cast<uintptr_t>(base_); }
  uint64_t reserved_bytes() const { return reserve_; }
  // The random token at the arena's start.
  std::span<const std::byte, kTokenBytes> token() const {
    return std::span<const std::byte, kTokenBytes>(base_, kTokenBytes);
  }
  // Bytes handed out now, and freed but kept populated (rounded sizes).
  uint64_t allocated_bytes() const;
  uint64_t kept_bytes() const;
  // The bound on kept ranges; lowering it punches out the oldest at once
  // (0 gives every kept page back).
  void set_max_kept_bytes(uint64_t bytes);
  uint64_t max_kept_bytes() const;

 private:
  // A free range that holds `bytes` at `alignment`, carved out of the free map.
  std::optional<uint64_t> take_free(uint64_t bytes, uint64_t alignment);
  void add_free(uint64_t offset, uint64_t bytes);
  // Punches the oldest kept ranges out until `more` fits the bound.
  void make_room_to_keep(uint64_t more);

  struct Range {
    uint64_t offset;
    uint64_t bytes;
  };

  int fd_ = -1;
  std::byte* base_ = nullptr;
  uint64_t reserve_ = 0;
  mutable std::mutex mutex_;
  std::map<uint64_t, uint64_t> free_;  // offset -> bytes, never adjacent; punched
  std::deque<Range> kept_;             // freed, still populated; oldest first
  uint64_t max_kept_ = 0;
  uint64_t kept_bytes_ = 0;
  uint64_t allocated_ = 0;
};

}  // namespace reshard::execute_detail
