#include "storage/support/test_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

namespace reshard::testing {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string_view reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    default: return "Status";
  }
}

void send_all(int connection, std::string_view data) {
  while (!data.empty()) {
    const ssize_t sent = ::send(connection, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent <= 0) return;
    data.remove_prefix(static_cast<size_t>(sent));
  }
}

}  // namespace

std::string ReceivedRequest::header(const std::string& name) const {
  const auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

TestHttpServer::TestHttpServer(Handler handler) : handler_(std::move(handler)) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener_ < 0) throw std::runtime_error("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t size = sizeof(address);
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), size) != 0 || ::listen(listener_, 16) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    ::close(listener_);
    throw std::runtime_error("cannot listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { serve(); });
}

TestHttpServer::~TestHttpServer() {
  stopping_ = true;
  thread_.join();
  ::close(listener_);
}

std::string TestHttpServer::url() const { return "http://" + host_port(); }

std::string TestHttpServer::host_port() const { return fmt::format("127.0.0.1:{}", port_); }

std::vector<ReceivedRequest> TestHttpServer::requests() const {
  const std::lock_guard lock(mutex_);
  return requests_;
}

void TestHttpServer::serve() {
  while (!stopping_) {
    pollfd wait{listener_, POLLIN, 0};
    if (::poll(&wait, 1, 50) <= 0) continue;
    const int connection = ::accept(listener_, nullptr, nullptr);
    if (connection < 0) continue;
    answer(connection);
    ::close(connection);
  }
}

void TestHttpServer::answer(int connection) {
  std::string data;
  char buffer[4096];
  size_t header_end = std::string::npos;
  size_t content_length = 0;
  // The headers, then the body by Content-Length (curl sends no chunked requests here).
  while (true) {
    if (header_end != std::string::npos && data.size() >= header_end + 4 + content_length) break;
    pollfd wait{connection, POLLIN, 0};
    if (::poll(&wait, 1, 5000) <= 0) return;
    const ssize_t got = ::recv(connection, buffer, sizeof(buffer), 0);
    if (got <= 0) return;
    data.append(buffer, static_cast<size_t>(got));
    if (header_end == std::string::npos && (header_end = data.find("\r\n\r\n")) != std::string::npos) {
      const std::string head = lower(data.substr(0, header_end));
      const size_t at = head.find("\r\ncontent-length:");
      if (at != std::string::npos) content_length = std::stoul(head.substr(at + 17));
    }
  }
  ReceivedRequest request;
  std::string_view head(data.data(), header_end);
  const size_t line_end = head.find("\r\n");
  const std::string_view line = head.substr(0, line_end);
  const size_t space = line.find(' ');
  request.method = std::string(line.substr(0, space));
  request.target = std::string(line.substr(space + 1, line.rfind(' ') - space - 1));
  for (size_t at = line_end; at != std::string_view::npos && at < head.size();) {
    const size_t next = head.find("\r\n", at + 2);
    const std::string_view field = head.substr(at + 2, next == std::string_view::npos ? std::string_view::npos
                                                                                      : next - at - 2);
    const size_t colon = field.find(':');
    if (colon != std::string_view::npos) {
      std::string_view value = field.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      request.headers[lower(std::string(field.substr(0, colon)))] = std::string(value);
    }
    at = next;
  }
  request.body = data.substr(header_end + 4, content_length);
  const CannedResponse response = handler_(request);
  {
    const std::lock_guard lock(mutex_);
    requests_.push_back(request);
  }
  send_all(connection,
           fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                       response.status, reason(response.status), response.content_type, response.body.size(),
                       response.body));
}

}  // namespace reshard::testing
