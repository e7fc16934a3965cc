// HTTP requests for the object-store drivers, over libcurl: no HTTP is written
// by hand. One client is shared by a store's threads; each request borrows an
// easy handle (and so a kept-alive connection) from its pool.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace reshard::storage_detail {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string url;             // scheme, host, path and query, already encoded
  Headers headers;             // sent as given (names as the caller spells them)
  std::span<const std::byte> body;  // not owned; sent with Content-Length
  // Where a successful (2xx) response's body goes instead of HttpResponse::body:
  // a ranged read's destination. A body of another size is a failed request.
  std::span<std::byte> body_into;
};

struct HttpResponse {
  // The HTTP status, or 0 when no response came (refused, reset, timed out).
  long status = 0;
  // Why no response came (status 0): curl's words, never the URL's query.
  std::string transport_error;
  // A failure that trying again cannot mend (the server sent more bytes than
  // the range asked for): no retry.
  bool permanent = false;
  Headers headers;  // names in lower case
  std::string body;  // error bodies always land here, even with body_into
  uint64_t bytes_into = 0;  // bytes written to body_into

  // The first header of that (lower-case) name.
  std::optional<std::string> header(std::string_view name) const;
  bool ok() const { return status >= 200 && status < 300; }
};

struct HttpClientOptions {
  // A transfer slower than one byte a second for this long is abandoned.
  std::chrono::milliseconds stall_timeout{std::chrono::seconds(120)};
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(20)};
};

class HttpClient {
 public:
  explicit HttpClient(HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request and waits for its whole response. Never throws for
  // what the network or the server does: that is in the response.
  HttpResponse send(const HttpRequest& request) const;

 private:
  struct Pool;
  HttpClientOptions options_;
  std::unique_ptr<Pool> pool_;
};

// Percent-encodes `text` as RFC 3986 unreserved characters allow; '/' is
// kept when `keep_slash` (an object key in a path).
std::string uri_encode(std::string_view text, bool keep_slash);

}  // namespace reshard::storage_detail
