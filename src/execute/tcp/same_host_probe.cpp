#include "execute/tcp/same_host_probe.h"

#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>

#include <fmt/format.h>

namespace reshard::tcp_detail {
namespace {

// What a process shows a peer of its host: where to find a random token in
// its memory, and the token, for the peer to try reading.
struct Offer {
  int64_t pid = 0;
  uint64_t token_address = 0;
  std::array<std::byte, 16> token{};
  uint8_t willing = 0;
};

// Bytes the kernel moves per process_vm_readv call at most (it returns a
// partial count beyond).
constexpr size_t kBytesPerCall = size_t{1} << 30;

bool opted_out() {
  const char* value = std::getenv("RESHARD_SINGLE_COPY");
  return value != nullptr && std::string_view(value) == "0";
}

}  // namespace

bool read_peer_memory(pid_t pid, uint64_t address, std::span<std::byte> into) noexcept {
  size_t moved = 0;
  while (moved < into.size()) {
    const size_t want = std::min(into.size() - moved, kBytesPerCall);
    iovec local{into.data() + moved, want};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(address + moved)), want};
    const ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    moved += static_cast<size_t>(n);
  }
  return true;
}

std::vector<pid_t> probe_same_host_peers(const JoinedJob& job, int rank, bool enabled,
                                         std::chrono::milliseconds timeout) {
  const size_t size = job.peers.size();
  std::vector<pid_t> readable(size, 0);
  Offer mine;
  mine.pid = ::getpid();
  mine.willing = enabled && !opted_out() ? 1 : 0;
  std::random_device device;
  for (auto& b : mine.token) b = static_cast<std::byte>(device());
  mine.token_address = reinterpret_cast<uintptr_t>(mine.token.data());
  const auto deadline = Clock::now() + timeout;
  const std::string& my_host = job.peers[static_cast<size_t>(rank)].host_key;
  // Each pair: both offer, both try, both tell; written before read, and
  // small enough never to block, so the order of pairs cannot deadlock.
  for (size_t peer = 0; peer < size; ++peer) {
    if (static_cast<int>(peer) == rank || job.peers[peer].host_key != my_host) continue;
    const Socket& link = job.connections[peer];
    const std::string who = fmt::format("rank {}", peer);
    write_exactly(link, std::as_bytes(std::span(&mine, 1)), deadline, who);
    Offer theirs;
    read_exactly(link, std::as_writable_bytes(std::span(&theirs, 1)), deadline, who);
    std::array<std::byte, 16> found{};
    const uint8_t can = mine.willing && theirs.willing &&
                                read_peer_memory(static_cast<pid_t>(theirs.pid), theirs.token_address, found) &&
                                found == theirs.token
                            ? 1
                            : 0;
    write_exactly(link, std::as_bytes(std::span(&can, 1)), deadline, who);
    uint8_t they_can = 0;
    read_exactly(link, std::as_writable_bytes(std::span(&they_can, 1)), deadline, who);
    if (can && they_can) readable[peer] = static_cast<pid_t>(theirs.pid);
  }
  return readable;
}

}  // namespace reshard::tcp_detail
