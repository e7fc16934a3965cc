#include "bench/mpi/tcp_beside_mpi.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::bench {
namespace {

// The address other hosts reach this one at: the first IPv4 address of an
// interface that is up and not the loopback.
std::string first_outward_ipv4() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return "127.0.0.1";
  std::string found = "127.0.0.1";
  for (const ifaddrs* entry = all; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET) continue;
    if ((entry->ifa_flags & IFF_UP) == 0 || (entry->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr, text, sizeof text);
    found = text;
    break;
  }
  ::freeifaddrs(all);
  return found;
}

// A port free on `ip` now (the rendezvous binds it a moment later).
int free_port_on(const std::string& ip) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  ::inet_pton(AF_INET, ip.c_str(), &address.sin_addr);
  socklen_t length = sizeof address;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  if (!ok) throw Error(ErrorCode::kTransport, fmt::format("no free port on {}", ip));
  return ntohs(address.sin_port);
}

}  // namespace

std::unique_ptr<TcpTransport> tcp_beside(Transport& mpi) {
  std::string coordinator;
  if (mpi.rank() == 0) {
    const std::string ip = first_outward_ipv4();
    coordinator = fmt::format("{}:{}", ip, free_port_on(ip));
  }
  const auto all = mpi.all_gather(std::as_bytes(std::span(coordinator.data(), coordinator.size())));
  coordinator.assign(reinterpret_cast<const char*>(all[0].data()), all[0].size());
  TcpTransportOptions options;
  options.rank = mpi.rank();
  options.size = mpi.size();
  options.coordinator = coordinator;
  options.timeout = mpi.timeout();
  return std::make_unique<TcpTransport>(options);
}

}  // namespace reshard::bench
