#include "storage/http/request_log.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace reshard::storage_detail {

bool debug_logging() {
  static const bool on = [] {
    const char* level = std::getenv("RESHARD_LOG");
    return level != nullptr && std::string_view(level) == "debug";
  }();
  return on;
}

void log_request(const HttpRequest& request, const HttpResponse& response, std::chrono::steady_clock::duration took) {
  if (!debug_logging()) return;
  const std::string_view url = request.url;
  const std::string_view place = url.substr(0, url.find('?'));
  const uint64_t received = response.bytes_into + response.body.size();
  const std::string outcome = response.status != 0 ? fmt::format("{}", response.status) : "no answer";
  const std::string line =
      fmt::format("reshard: {} {} -> {} ({} bytes sent, {} received, {:.1f} ms)\n", request.method, place, outcome,
                  request.body.size(), received, std::chrono::duration<double, std::milli>(took).count());
  // One write, so that the lines of threads and processes do not interleave.
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace reshard::storage_detail
