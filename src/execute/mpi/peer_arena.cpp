#include "peer_arena.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace reshard::mpi_detail {
namespace {

// A duplicate of descriptor `fd` of process `pid`, or -1 (glibc 2.36 wraps
// neither call everywhere, so they go as system calls).
int duplicate_peer_fd(pid_t pid, int fd) {
  const long pidfd = ::syscall(SYS_pidfd_open, pid, 0);
  if (pidfd < 0) return -1;
  const long copy = ::syscall(SYS_pidfd_getfd, static_cast<int>(pidfd), fd, 0);
  ::close(static_cast<int>(pidfd));
  return static_cast<int>(copy);
}

}  // namespace

std::unique_ptr<PeerArena> PeerArena::map(pid_t pid, int fd, uint64_t remote_base, uint64_t bytes,
                                          std::span<const std::byte> token) noexcept {
  if (bytes < token.size() || fd < 0) return nullptr;
  const int copy = duplicate_peer_fd(pid, fd);
  if (copy < 0) return nullptr;
  // Only a memory file at least as long as announced: a shorter one would
  // fault (SIGBUS) where it ends.
  struct stat status {};
  void* local = MAP_FAILED;
  if (::fstat(copy, &status) == 0 && S_ISREG(status.st_mode) && static_cast<uint64_t>(status.st_size) >= bytes) {
    // Writable: a sender whose rows are strided writes them into its
    // receiver's runs itself (see DirectSend). The pair may already read and
    // write each other's memory (ptrace permission), so this grants nothing new.
    local = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, copy, 0);
  }
  ::close(copy);
  if (local == MAP_FAILED) return nullptr;
  if (std::memcmp(local, token.data(), token.size()) != 0) {
    ::munmap(local, bytes);
    return nullptr;
  }
  try {
    return std::unique_ptr<PeerArena>(new PeerArena(static_cast<std::byte*>(local), remote_base, bytes));
  } catch (...) {
    ::munmap(local, bytes);
    return nullptr;
  }
}

PeerArena::~PeerArena() { ::munmap(local_, bytes_); }

std::optional<std::vector<RunGroup>> PeerArena::to_local(std::span<const RunGroup> remote) const {
  std::vector<RunGroup> local(remote.begin(), remote.end());
  const uint64_t shift = reinterpret_cast<uintptr_t>(local_) - remote_base_;
  for (RunGroup& group : local) {
    if (!group_inside(group, remote_base_, bytes_)) return std::nullopt;
    group.address += shift;  // unsigned: wraps to the same place either way
  }
  return local;
}

}  // namespace reshard::mpi_detail
