// A tiny HTTP/1.1 server on 127.0.0.1 for tests that must see what a client
// sends (headers included) and choose what it answers: a fake metadata
// server, a storage endpoint that checks the Authorization header. One
// connection at a time, one request per connection.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace reshard::testing {

struct ReceivedRequest {
  std::string method;
  std::string target;                          // path and query, as sent
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;

  // The header's value, or empty.
  std::string header(const std::string& name) const;
};

struct CannedResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

class TestHttpServer {
 public:
  using Handler = std::function<CannedResponse(const ReceivedRequest&)>;

  explicit TestHttpServer(Handler handler);
  ~TestHttpServer();
  TestHttpServer(const TestHttpServer&) = delete;
  TestHttpServer& operator=(const TestHttpServer&) = delete;

  std::string url() const;        // "http://127.0.0.1:PORT"
  std::string host_port() const;  // "127.0.0.1:PORT"
  // Every request answered so far, in order.
  std::vector<ReceivedRequest> requests() const;

 private:
  void serve();
  void answer(int connection);

  Handler handler_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::vector<ReceivedRequest> requests_;
  std::thread thread_;
};

}  // namespace reshard::testing
