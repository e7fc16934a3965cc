#include "same_host_peers.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "../shared_arena.h"
#include "mpi_error.h"
#include "same_host_copy.h"

namespace reshard::mpi_detail {
namespace {

struct Identity {
  int64_t pid = 0;
  uint64_t token_address = 0;
  std::array<std::byte, 16> token{};
  std::array<char, 48> boot_id{};  // the kernel instance: equal on one host (and one VM)
  uint64_t net_namespace = 0;      // its inode: containers and namespaced test hosts on one kernel differ
  std::array<char, 64> host_name{};
  std::array<char, INET_ADDRSTRLEN> address{};  // the first non-loopback IPv4 address; empty if none
  uint8_t enabled = 0;
  uint8_t offers_arena = 0;  // shared memory wanted, and this process has an arena
  int32_t arena_fd = -1;
  uint64_t arena_base = 0;
  uint64_t arena_bytes = 0;
  std::array<std::byte, execute_detail::SharedArena::kTokenBytes> arena_token{};
};

// What one process found out about another, sent back to it.
enum ProbeBits : uint8_t { kCanRead = 1, kCanMap = 2 };

// One host: one kernel and one network. Processes of one kernel in different
// network namespaces (containers, pods, the test hosts of
// scripts/netns-hosts.sh) are hosts of their own, with their own addresses.
bool same_host(const Identity& a, const Identity& b) {
  return a.boot_id == b.boot_id && a.net_namespace == b.net_namespace;
}

uint64_t read_net_namespace() {
  struct stat status {};
  return ::stat("/proc/self/ns/net", &status) == 0 ? static_cast<uint64_t>(status.st_ino) : 0;
}

std::array<char, 48> read_boot_id() {
  std::array<char, 48> id{};
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string text;
  if (!(in >> text)) {
    // No boot id: the host name stands in; the token read still decides.
    std::array<char, 48> host{};
    if (::gethostname(host.data(), host.size() - 1) == 0) return host;
    return id;
  }
  std::memcpy(id.data(), text.data(), std::min(text.size(), id.size() - 1));
  return id;
}

std::array<char, 64> read_host_name() {
  std::array<char, 64> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) name = {};
  return name;
}

// Hosts made of namespaces or containers share one host name, so the name
// alone does not tell them apart in an error; their addresses do. An
// interface that is up wins over one that is down.
std::array<char, INET_ADDRSTRLEN> read_address() {
  std::array<char, INET_ADDRSTRLEN> text{};
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return text;
  const ifaddrs* chosen = nullptr;
  for (const ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    if (chosen == nullptr || ((it->ifa_flags & IFF_UP) != 0 && (chosen->ifa_flags & IFF_UP) == 0)) chosen = it;
  }
  if (chosen != nullptr) {
    sockaddr_in address{};
    std::memcpy(&address, chosen->ifa_addr, sizeof(address));
    if (::inet_ntop(AF_INET, &address.sin_addr, text.data(), text.size()) == nullptr) text = {};
  }
  ::freeifaddrs(list);
  return text;
}

// "myhost, 10.213.0.3", or the one of the two that is known.
std::string host_label(const Identity& id) {
  const std::string name(id.host_name.data(), ::strnlen(id.host_name.data(), id.host_name.size()));
  const std::string address(id.address.data(), ::strnlen(id.address.data(), id.address.size()));
  if (name.empty() || address.empty()) return name.empty() ? (address.empty() ? "unknown" : address) : name;
  return fmt::format("{}, {}", name, address);
}

// Hosts numbered in the order of their lowest rank: rank 0's is host 0.
void number_hosts(const std::vector<Identity>& all, HostPeers& found) {
  found.host_of.assign(all.size(), 0);
  found.host_names.assign(all.size(), std::string());
  int hosts = 0;
  for (size_t j = 0; j < all.size(); ++j) {
    size_t first = 0;
    while (!same_host(all[first], all[j])) ++first;
    found.host_of[j] = first == j ? hosts++ : found.host_of[first];
    found.host_names[j] = host_label(all[j]);
  }
}

std::string_view setting(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string_view(value) : std::string_view();
}
std::string_view single_copy_setting() { return setting("RESHARD_SINGLE_COPY"); }
std::string_view shared_memory_setting() { return setting("RESHARD_SHARED_MEMORY"); }

// Offers this process's arena to its peers, where shared memory is wanted.
void offer_arena(Identity& me, bool shared_memory) {
  if (!shared_memory || shared_memory_setting() == "0") return;
  const execute_detail::SharedArena* arena = execute_detail::SharedArena::for_process();
  if (arena == nullptr) return;
  me.offers_arena = 1;
  me.arena_fd = arena->fd();
  me.arena_base = arena->base_address();
  me.arena_bytes = arena->reserved_bytes();
  std::copy(arena->token().begin(), arena->token().end(), me.arena_token.begin());
}

// The peer's arena mapped here, or null.
std::shared_ptr<const PeerArena> map_arena(const Identity& me, const Identity& peer) {
  if (me.offers_arena == 0 || peer.offers_arena == 0 || shared_memory_setting() == "refuse") return nullptr;
  return PeerArena::map(static_cast<pid_t>(peer.pid), peer.arena_fd, peer.arena_base, peer.arena_bytes,
                        peer.arena_token);
}

// The path between two processes and why: single copy only when both want
// it, they share a host, and each could read the other's token.
PeerPath classify(const Identity& me, const Identity& peer, bool both_read) {
  if (me.enabled == 0 || peer.enabled == 0) return PeerPath::kOptedOut;
  if (!same_host(me, peer)) return PeerPath::kOtherHost;
  return both_read ? PeerPath::kSingleCopy : PeerPath::kRefused;
}

}  // namespace

HostPeers find_same_host_peers(MPI_Comm comm, bool enabled, bool shared_memory) {
  int rank = 0;
  int size = 1;
  check_mpi(MPI_Comm_rank(comm, &rank), "reading this rank");
  check_mpi(MPI_Comm_size(comm, &size), "reading the job's size");
  HostPeers found;
  found.paths.assign(static_cast<size_t>(size), PeerPath::kSelf);

  Identity me;
  me.pid = static_cast<int64_t>(::getpid());
  std::random_device random;
  for (std::byte& b : me.token) b = static_cast<std::byte>(random());
  me.token_address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(me.token.data()));
  me.boot_id = read_boot_id();
  me.net_namespace = read_net_namespace();
  me.host_name = read_host_name();
  me.address = read_address();
  me.enabled = enabled && single_copy_setting() != "0" ? 1 : 0;
  offer_arena(me, me.enabled != 0 && shared_memory);
  const bool refuse = single_copy_setting() == "refuse";
  std::vector<Identity> all(static_cast<size_t>(size));
  check_mpi(MPI_Allgather(&me, sizeof(Identity), MPI_BYTE, all.data(), sizeof(Identity), MPI_BYTE, comm),
            "sharing which processes are on this host");
  number_hosts(all, found);
  if (size == 1) return found;

  std::vector<uint8_t> i_found(static_cast<size_t>(size), 0);
  found.arenas.assign(static_cast<size_t>(size), nullptr);
  for (size_t j = 0; j < all.size(); ++j) {
    const Identity& peer = all[j];
    // Probe only the peers that nothing but the probe keeps from a single copy.
    if (static_cast<int>(j) == rank || classify(me, peer, true) != PeerPath::kSingleCopy) continue;
    if (refuse || !can_read_peer(static_cast<pid_t>(peer.pid), peer.token_address, peer.token)) continue;
    i_found[j] = kCanRead;
    found.arenas[j] = map_arena(me, peer);
    if (found.arenas[j]) i_found[j] |= kCanMap;
  }
  // Every peer's probe of our token ends before it enters this exchange, so
  // the token may go once it returns.
  std::vector<uint8_t> found_me(static_cast<size_t>(size), 0);
  check_mpi(MPI_Alltoall(i_found.data(), 1, MPI_BYTE, found_me.data(), 1, MPI_BYTE, comm),
            "sharing which processes can copy directly");
  for (size_t j = 0; j < found.paths.size(); ++j) {
    if (static_cast<int>(j) == rank) continue;
    const uint8_t both = i_found[j] & found_me[j];
    found.paths[j] = classify(me, all[j], (both & kCanRead) != 0);
    if (found.paths[j] == PeerPath::kSingleCopy && (both & kCanMap) != 0) {
      found.paths[j] = PeerPath::kSharedMemory;
    } else {
      found.arenas[j] = nullptr;
    }
    if (same_host(all[j], me)) ++found.processes_on_host;
  }
  return found;
}

}  // namespace reshard::mpi_detail
