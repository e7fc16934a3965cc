#include "shared_arena.h"

#include "reshard/execute/cached_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "layout/checked.h"
#include "layout/copy_bytes.h"
#include "reshard/layout/error.h"

namespace reshard::execute_detail {

using layout_detail::copy_bytes;
using layout_detail::prefetch_rows_a_page_apart;
using layout_detail::range_inside;

namespace {

constexpr uint64_t kGranule = uint64_t{64} << 10;
constexpr uint64_t kHugePage = uint64_t{2} << 20;
// The process's arena reserves the host's memory, at most this much.
constexpr uint64_t kMaxReserve = uint64_t{1} << 40;

uint64_t round_up(uint64_t value, uint64_t to) { return (value + to - 1) / to * to; }

// The bytes a request of `bytes` takes in the arena.
uint64_t granules_for(size_t bytes) { return round_up(std::max<uint64_t>(bytes, 1), kGranule); }

std::atomic<bool> serving{false};

Error system_error(const std::string& what) {
  return Error(ErrorCode::kIo, fmt::format("shared memory arena: {}: {}", what, std::strerror(errno)));
}

uint64_t host_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return uint64_t{64} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

// Maps all of `fd` at a 2 MiB boundary, so that offsets aligned in the file
// are aligned in memory: address space for one more huge page is taken
// first, the file mapped over its aligned part, the rest given back.
// MAP_NORESERVE: the reserve is address space, not a promise of memory.
std::byte* map_aligned(int fd, uint64_t bytes) {
  void* space = ::mmap(nullptr, bytes + kHugePage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (space == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(space);
  const uintptr_t aligned = round_up(start, kHugePage);
  void* mapped = ::mmap(reinterpret_cast<void*>(aligned), bytes, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_NORESERVE | MAP_FIXED, fd, 0);
  if (mapped == MAP_FAILED) {
    ::munmap(space, bytes + kHugePage);
    return nullptr;
  }
  if (aligned > start) ::munmap(space, aligned - start);
  const uintptr_t end = aligned + bytes;
  if (start + bytes + kHugePage > end) ::munmap(reinterpret_cast<void*>(end), start + bytes + kHugePage - end);
  return static_cast<std::byte*>(mapped);
}

}  // namespace

SharedArena::SharedArena(uint64_t reserve, uint64_t max_kept_bytes)
    : reserve_(round_up(std::max(reserve, 2 * kGranule), kGranule)), max_kept_(max_kept_bytes) {
  fd_ = ::memfd_create("reshard-arena", MFD_CLOEXEC);
  if (fd_ < 0) throw system_error("memfd_create");
  if (::ftruncate(fd_, static_cast<off_t>(reserve_)) != 0) {
    const Error error = system_error(fmt::format("reserving {} bytes", reserve_));
    ::close(fd_);
    throw error;
  }
  base_ = map_aligned(fd_, reserve_);
  if (base_ == nullptr) {
    const Error error = system_error(fmt::format("mapping {} bytes", reserve_));
    ::close(fd_);
    throw error;
  }
  // A child of fork() must not share (and so change) our buffers.
  (void)::madvise(base_, reserve_, MADV_DONTFORK);
  std::random_device random;
  for (size_t i = 0; i < kTokenBytes; ++i) base_[i] = static_cast<std::byte>(random());
  free_.emplace(kGranule, reserve_ - kGranule);
}

SharedArena::~SharedArena() {
  ::munmap(base_, reserve_);
  ::close(fd_);
}

SharedArena* SharedArena::for_process() {
  // Never destroyed: buffers may be freed by other static destructors.
  static SharedArena* const arena = []() -> SharedArena* {
    try {
      const uint64_t reserve = std::min(host_memory(), kMaxReserve);
      return new SharedArena(reserve, std::min(reserve / 8, cached_memory_limit()));
    } catch (const Error&) {
      return nullptr;
    }
  }();
  return arena;
}

void SharedArena::serve_allocations() {
  // Shared memory comes in small pages here (unless the kernel gives shmem
  // huge pages): strided copies out of it do better asking ahead.
  prefetch_rows_a_page_apart(true);
  serving.store(true, std::memory_order_release);
}
bool SharedArena::serving_allocations() { return serving.load(std::memory_order_acquire); }

std::byte* SharedArena::allocate(size_t bytes) {
  const uint64_t rounded = granules_for(bytes);
  const uint64_t alignment = rounded >= 2 * kHugePage ? kHugePage : kGranule;
  std::optional<uint64_t> offset;
  {
    std::lock_guard guard(mutex_);
    // A kept range of this size first, most recently freed: its pages are
    // there, and mapped in the peers that read its last buffer.
    const auto kept = std::find_if(kept_.rbegin(), kept_.rend(), [&](const Range& r) { return r.bytes == rounded; });
    if (kept != kept_.rend()) {
      offset = kept->offset;
      kept_bytes_ -= rounded;
      kept_.erase(std::next(kept).base());
    } else {
      offset = take_free(rounded, alignment);
      if (!offset) {
        // Room held by kept ranges of other sizes is room all the same.
        make_room_to_keep(max_kept_);
        offset = take_free(rounded, alignment);
      }
      if (!offset) return nullptr;
    }
    allocated_ += rounded;
  }
  std::byte* data = base_ + *offset;
  // Advice only: where the kernel gives shared memory no huge pages, nothing changes.
  if (alignment == kHugePage) (void)::madvise(data, rounded - rounded % kHugePage, MADV_HUGEPAGE);
  return data;
}

void SharedArena::release(std::byte* data, size_t bytes) noexcept {
  const uint64_t offset = static_cast<uint64_t>(data - base_);
  const uint64_t rounded = granules_for(bytes);
  std::lock_guard guard(mutex_);
  allocated_ -= rounded;
  if (rounded <= max_kept_) {
    make_room_to_keep(rounded);
    try {
      kept_.push_back({offset, rounded});
      kept_bytes_ += rounded;
      return;
    } catch (...) {
      // No memory to remember it by: punched below like the rest.
    }
  }
  (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                    static_cast<off_t>(rounded));
  add_free(offset, rounded);
}

void SharedArena::make_room_to_keep(uint64_t more) {
  while (!kept_.empty() && kept_bytes_ + more > max_kept_) {
    const Range oldest = kept_.front();
    kept_.pop_front();
    kept_bytes_ -= oldest.bytes;
    // The pages go back to the kernel, and read as zeros in every mapping.
    (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(oldest.offset),
                      static_cast<off_t>(oldest.bytes));
    add_free(oldest.offset, oldest.bytes);
  }
}

void SharedArena::set_max_kept_bytes(uint64_t bytes) {
  std::lock_guard guard(mutex_);
  max_kept_ = bytes;
  make_room_to_keep(0);
}

uint64_t SharedArena::max_kept_bytes() const {
  std::lock_guard guard(mutex_);
  return max_kept_;
}

bool SharedArena::contains(const void* data, uint64_t bytes) const {
  return range_inside(reinterpret_cast<uintptr_t>(data), bytes, base_address(), reserve_);
}

uint64_t SharedArena::allocated_bytes() const {
  std::lock_guard guard(mutex_);
  return allocated_;
}

uint64_t SharedArena::kept_bytes() const {
  std::lock_guard guard(mutex_);
  return kept_bytes_;
}

std::optional<uint64_t> SharedArena::take_free(uint64_t bytes, uint64_t alignment) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t begin = it->first;
    const uint64_t end = it->first + it->second;
    const uint64_t start = round_up(begin, alignment);
    if (start > end || end - start < bytes) continue;
    free_.erase(it);
    if (start > begin) free_.emplace(begin, start - begin);
    if (end > start + bytes) free_.emplace(start + bytes, end - start - bytes);
    return start;
  }
  return std::nullopt;
}

void SharedArena::add_free(uint64_t offset, uint64_t bytes) {
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == offset + bytes) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      previous->second += bytes;
      return;
    }
  }
  free_.emplace(offset, bytes);
}

}  // namespace reshard::execute_detail
