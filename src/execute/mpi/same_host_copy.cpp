#include "same_host_copy.h"

#include <sys/uio.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::mpi_detail {
namespace {

// The kernel takes at most IOV_MAX iovecs per side and call.
constexpr size_t kIovecsPerCall = IOV_MAX;
// And moves at most this much per call (it returns a partial count beyond).
constexpr uint64_t kBytesPerCall = uint64_t{1} << 30;

ssize_t read_once(pid_t pid, std::span<const iovec> local, std::span<const iovec> remote) {
  return process_vm_readv(pid, local.data(), static_cast<unsigned long>(local.size()), remote.data(),
                          static_cast<unsigned long>(remote.size()), 0);
}

}  // namespace

void read_from_peer(pid_t pid, int peer_rank, std::span<const RunGroup> remote, std::span<const RunGroup> local,
                    uint64_t bytes) {
  std::vector<iovec> local_iovecs(kIovecsPerCall);
  std::vector<iovec> remote_iovecs(kIovecsPerCall);
  RunCursor local_cursor(local);
  RunCursor remote_cursor(remote);
  uint64_t moved = 0;
  while (moved < bytes) {
    // Both sides of one call cover the same bytes: as many as the side with
    // the shorter reach allows.
    const uint64_t want = std::min(bytes - moved, kBytesPerCall);
    const auto remote_fill = remote_cursor.peek(remote_iovecs, want);
    const auto local_fill = local_cursor.peek(local_iovecs, remote_fill.bytes);
    const auto remote_used = remote_cursor.peek(remote_iovecs, local_fill.bytes);
    const ssize_t n = read_once(pid, std::span(local_iovecs).first(local_fill.iovecs),
                                std::span(remote_iovecs).first(remote_used.iovecs));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      throw Error(ErrorCode::kTransport,
                  fmt::format("reading rank {}'s memory (pid {}) failed after {} of {} bytes: {}", peer_rank, pid,
                              moved, bytes, std::strerror(error)));
    }
    local_cursor.advance(static_cast<uint64_t>(n));
    remote_cursor.advance(static_cast<uint64_t>(n));
    moved += static_cast<uint64_t>(n);
  }
}

bool can_read_peer(pid_t pid, uint64_t address, std::span<const std::byte> expected) noexcept {
  std::array<std::byte, 64> found{};
  if (expected.size() > found.size()) return false;
  iovec local{found.data(), expected.size()};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(address)), expected.size()};
  const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  return n == static_cast<ssize_t>(expected.size()) && std::memcmp(found.data(), expected.data(), expected.size()) == 0;
}

}  // namespace reshard::mpi_detail
