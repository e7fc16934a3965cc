// An endpoint on 127.0.0.1 that nothing listens on (a port bound, then
// released): connections to it are refused at once.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace reshard::testing {

inline std::string unanswered_endpoint() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const bool ok = s >= 0 && ::bind(s, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
                  ::getsockname(s, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  if (s >= 0) ::close(s);
  if (!ok) throw std::runtime_error("cannot find a free port on 127.0.0.1");
  return "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
}

}  // namespace reshard::testing
