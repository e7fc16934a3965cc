#include "execute/tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::tcp_detail {
namespace {

using namespace std::chrono_literals;

struct AddressList {
  addrinfo* head = nullptr;
  ~AddressList() {
    if (head != nullptr) ::freeaddrinfo(head);
  }
};

// getaddrinfo for TCP; `host` empty with `passive`: every local address.
int resolve(const std::string& host, uint16_t port, bool passive, AddressList& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  return ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.head);
}

std::string format_address(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    return fmt::format("{}:{}", text, ntohs(v4.sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    return fmt::format("[{}]:{}", text, ntohs(v6.sin6_port));
  }
  return "?";
}

// Waits until `fd` is ready for `events` or `deadline` passes; false then.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= 0ms) return false;
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // the read or write reports the error
  }
}

// One attempt: a connected socket, or -1 with errno's value in `error`.
int try_connect(const addrinfo& target, const std::string& bind_host, int& error) {
  Socket socket(::socket(target.ai_family, target.ai_socktype | SOCK_CLOEXEC, target.ai_protocol));
  if (!socket.valid()) {
    error = errno;
    return -1;
  }
  if (!bind_host.empty()) {
    AddressList local;
    if (resolve(bind_host, 0, true, local) != 0 || local.head == nullptr ||
        ::bind(socket.fd(), local.head->ai_addr, local.head->ai_addrlen) != 0) {
      error = errno == 0 ? EADDRNOTAVAIL : errno;
      return -1;
    }
  }
  if (::connect(socket.fd(), target.ai_addr, target.ai_addrlen) != 0) {
    error = errno;
    return -1;
  }
  return socket.release();
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string system_error_text(int error) {
  char buffer[256] = {};
  return std::string(::strerror_r(error, buffer, sizeof buffer));
}

HostPort parse_host_port(std::string_view text, std::string_view what) {
  const auto fail = [&](std::string_view why) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("{} '{}' is not host:port ({})", what, text, why));
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) throw fail("no host or no port");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') throw fail("an IPv6 address goes in brackets");
    host = host.substr(1, host.size() - 2);
  }
  unsigned port = 0;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc() || end != port_text.data() + port_text.size() || port > 65535) {
    throw fail("the port is not a number from 0 to 65535");
  }
  return {std::string(host), static_cast<uint16_t>(port)};
}

Socket listen_on(const std::string& host, uint16_t port) {
  AddressList addresses;
  if (const int status = resolve(host, port, true, addresses); status != 0) {
    throw Error(ErrorCode::kTransport, fmt::format("cannot listen on {}:{}: {}", host, port, ::gai_strerror(status)));
  }
  int last_error = 0;
  for (const addrinfo* entry = addresses.head; entry != nullptr; entry = entry->ai_next) {
    Socket socket(::socket(entry->ai_family, entry->ai_socktype | SOCK_CLOEXEC, entry->ai_protocol));
    if (!socket.valid()) {
      last_error = errno;
      continue;
    }
    const int on = 1;
    ::setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(socket.fd(), entry->ai_addr, entry->ai_addrlen) == 0 && ::listen(socket.fd(), 128) == 0) {
      return socket;
    }
    last_error = errno;
  }
  throw Error(ErrorCode::kTransport, fmt::format("cannot listen on {}:{}: {}{}", host, port,
                                                 system_error_text(last_error),
                                                 last_error == EADDRINUSE ? " (another process holds that port)" : ""));
}

Socket connect_until(const HostPort& address, std::string_view role, const std::string& bind_host,
                     Clock::time_point deadline) {
  std::string last = "no attempt made";
  auto pause = 10ms;
  do {
    AddressList targets;
    if (const int status = resolve(address.host, address.port, false, targets); status != 0) {
      last = ::gai_strerror(status);
    } else {
      for (const addrinfo* entry = targets.head; entry != nullptr; entry = entry->ai_next) {
        int error = 0;
        if (const int fd = try_connect(*entry, bind_host, error); fd >= 0) return Socket(fd);
        last = system_error_text(error);
      }
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, std::max<Clock::duration>(deadline - Clock::now(), 0ms)));
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  } while (Clock::now() < deadline);
  throw Error(ErrorCode::kTimeout, fmt::format("could not reach {} at {}:{} in time (last: {})", role, address.host,
                                               address.port, last));
}

Socket accept_until(const Socket& listener, Clock::time_point deadline) {
  while (wait_ready(listener.fd(), POLLIN, deadline)) {
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return Socket(fd);
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
      throw Error(ErrorCode::kTransport, "accepting a connection: " + system_error_text(errno));
    }
  }
  return Socket();
}

std::string local_address(const Socket& socket) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length) != 0) return "?";
  return format_address(address);
}

std::string peer_address(const Socket& socket) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getpeername(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length) != 0) return "?";
  return format_address(address);
}

std::string local_ip(const Socket& socket) {
  HostPort parts = parse_host_port(local_address(socket), "local address");
  return parts.host;
}

void write_exactly(const Socket& socket, std::span<const std::byte> data, Clock::time_point deadline,
                   std::string_view peer) {
  while (!data.empty()) {
    if (!wait_ready(socket.fd(), POLLOUT, deadline)) {
      throw Error(ErrorCode::kTimeout, fmt::format("{} took no data in time", peer));
    }
    const ssize_t sent = ::send(socket.fd(), data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw Error(ErrorCode::kTransport, fmt::format("sending to {}: {}", peer, system_error_text(errno)));
    }
    data = data.subspan(static_cast<size_t>(sent));
  }
}

void read_exactly(const Socket& socket, std::span<std::byte> data, Clock::time_point deadline,
                  std::string_view peer) {
  while (!data.empty()) {
    if (!wait_ready(socket.fd(), POLLIN, deadline)) {
      throw Error(ErrorCode::kTimeout, fmt::format("{} sent nothing in time", peer));
    }
    const ssize_t got = ::recv(socket.fd(), data.data(), data.size(), MSG_DONTWAIT);
    if (got == 0) throw Error(ErrorCode::kTransport, fmt::format("{} closed the connection", peer));
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw Error(ErrorCode::kTransport, fmt::format("reading from {}: {}", peer, system_error_text(errno)));
    }
    data = data.subspan(static_cast<size_t>(got));
  }
}

void make_nonblocking(const Socket& socket) {
  const int flags = ::fcntl(socket.fd(), F_GETFL);
  if (flags < 0 || ::fcntl(socket.fd(), F_SETFL, flags | O_NONBLOCK) != 0) {
    throw Error(ErrorCode::kTransport, "making a socket non-blocking: " + system_error_text(errno));
  }
}

void disable_nagle(const Socket& socket) {
  const int on = 1;
  ::setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

}  // namespace reshard::tcp_detail
