// Sockets for the TCP transport: an owning file descriptor, addresses as
// "host:port" text, and blocking reads and writes bounded by a deadline (the
// rendezvous's); the progress engine does its own non-blocking I/O.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace reshard::tcp_detail {

using Clock = std::chrono::steady_clock;

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close();

 private:
  int fd_ = -1;
};

// "host:port" split; a host in brackets is IPv6 ("[::1]:80"). Throws
// Error(kInvalidArgument) naming `what` (the option it came from).
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
HostPort parse_host_port(std::string_view text, std::string_view what);

// A socket listening on `host` (a name or an address; empty: every address)
// at `port` (0: any free one). Throws Error(kTransport) naming the address.
Socket listen_on(const std::string& host, uint16_t port);

// Connects to `address` from `bind_host` (empty: wherever the route says),
// retrying a refused or unreachable address until `deadline`, since the
// process that listens there may start later. Throws Error(kTimeout) naming
// `address`, what it is (`role`) and the last error.
Socket connect_until(const HostPort& address, std::string_view role, const std::string& bind_host,
                     Clock::time_point deadline);

// The next connection to `listener`, or an invalid Socket at `deadline`.
Socket accept_until(const Socket& listener, Clock::time_point deadline);

// "ip:port" of the socket's own end, and of its peer's.
std::string local_address(const Socket& socket);
std::string peer_address(const Socket& socket);
// The address part of local_address (what a listener for the same network binds).
std::string local_ip(const Socket& socket);

// Blocking I/O of exactly `data.size()` bytes by `deadline`. Throws
// Error(kTimeout) when the deadline passes and Error(kTransport) when the
// connection fails or closes, naming `peer`.
void write_exactly(const Socket& socket, std::span<const std::byte> data, Clock::time_point deadline,
                   std::string_view peer);
void read_exactly(const Socket& socket, std::span<std::byte> data, Clock::time_point deadline, std::string_view peer);

// For the progress engine: non-blocking, no Nagle delay on small frames,
// keepalive off (heartbeats do that job).
void make_nonblocking(const Socket& socket);
void disable_nagle(const Socket& socket);

// strerror's text for errno value `error`.
std::string system_error_text(int error);

}  // namespace reshard::tcp_detail
