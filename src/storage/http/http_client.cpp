#include "storage/http/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "storage/ascii_lower.h"
#include "storage/http/request_log.h"

namespace reshard::storage_detail {
namespace {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw Error(ErrorCode::kIo, "libcurl could not be initialised");
    }
  });
}

struct Transfer {
  const HttpRequest* request = nullptr;
  HttpResponse* response = nullptr;
  size_t sent = 0;
  bool overflowed = false;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const size_t n = size * count;
  const bool into = !t.request->body_into.empty() && t.response->status >= 200 && t.response->status < 300;
  if (!into) {
    t.response->body.append(data, n);
    return n;
  }
  const std::span<std::byte> out = t.request->body_into;
  if (t.response->bytes_into + n > out.size()) {
    t.overflowed = true;
    return 0;  // aborts the transfer: more bytes than the range asked for
  }
  std::memcpy(out.data() + t.response->bytes_into, data, n);
  t.response->bytes_into += n;
  return n;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const size_t n = size * count;
  std::string_view line(data, n);
  if (line.starts_with("HTTP/")) {
    // A new response (after a 100 Continue or a redirect): forget the last one's headers.
    t.response->headers.clear();
    const size_t space = line.find(' ');
    if (space != std::string_view::npos) t.response->status = std::strtol(data + space + 1, nullptr, 10);
    return n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string name = ascii_lower(line.substr(0, colon));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
    value.remove_suffix(1);
  }
  t.response->headers.emplace_back(std::move(name), std::string(value));
  return n;
}

size_t on_read(char* buffer, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const std::span<const std::byte> body = t.request->body;
  const size_t n = std::min(size * count, body.size() - t.sent);
  std::memcpy(buffer, body.data() + t.sent, n);
  t.sent += n;
  return n;
}

// curl rewinds the body when it must send it again (a redirect, a reused
// connection that turned out closed).
int on_seek(void* user, curl_off_t offset, int origin) {
  auto& t = *static_cast<Transfer*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > t.request->body.size()) {
    return CURL_SEEKFUNC_FAIL;
  }
  t.sent = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

// The URL without its query: queries may hold signatures or tokens.
std::string without_query(std::string_view url) { return std::string(url.substr(0, url.find('?'))); }

// The request's headers, with none of curl's own: no "Expect: 100-continue"
// round trip before each part, and no body type guessed for PUT and POST.
struct curl_slist* header_list(const HttpRequest& request) {
  struct curl_slist* headers = nullptr;
  bool has_type = false;
  for (const auto& [name, value] : request.headers) {
    headers = curl_slist_append(headers, fmt::format("{}: {}", name, value).c_str());
    has_type = has_type || ascii_lower(name) == "content-type";
  }
  headers = curl_slist_append(headers, "Expect:");
  if (!has_type && (request.method == "POST" || request.method == "PUT")) {
    headers = curl_slist_append(headers, "Content-Type:");
  }
  return headers;
}

// A PUT's or POST's body, read (and rewound for a retry) from the request.
void send_body_from(CURL* handle, Transfer& transfer) {
  curl_easy_setopt(handle, CURLOPT_READFUNCTION, on_read);
  curl_easy_setopt(handle, CURLOPT_READDATA, &transfer);
  curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, on_seek);
  curl_easy_setopt(handle, CURLOPT_SEEKDATA, &transfer);
}

void set_method(CURL* handle, const HttpRequest& request, Transfer& transfer) {
  const auto body_size = static_cast<curl_off_t>(request.body.size());
  if (request.method == "HEAD") {
    curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT") {
    curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L);
    send_body_from(handle, transfer);
    curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE, body_size);
  } else if (request.method == "POST") {
    curl_easy_setopt(handle, CURLOPT_POST, 1L);
    send_body_from(handle, transfer);
    curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, body_size);
  } else if (request.method != "GET") {
    curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
}

}  // namespace

std::optional<std::string> HttpResponse::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return std::nullopt;
}

struct HttpClient::Pool {
  std::mutex mutex;
  std::vector<CURL*> idle;

  ~Pool() {
    for (CURL* handle : idle) curl_easy_cleanup(handle);
  }
  CURL* take() {
    {
      const std::lock_guard lock(mutex);
      if (!idle.empty()) {
        CURL* handle = idle.back();
        idle.pop_back();
        curl_easy_reset(handle);  // keeps the connection cache
        return handle;
      }
    }
    CURL* handle = curl_easy_init();
    if (handle == nullptr) throw Error(ErrorCode::kIo, "libcurl could not make a request handle");
    return handle;
  }
  void give_back(CURL* handle) {
    const std::lock_guard lock(mutex);
    idle.push_back(handle);
  }
};

HttpClient::HttpClient(HttpClientOptions options) : options_(options), pool_(std::make_unique<Pool>()) {
  init_curl_once();
}

HttpClient::~HttpClient() = default;

HttpResponse HttpClient::send(const HttpRequest& request) const {
  HttpResponse response;
  Transfer transfer{&request, &response};
  CURL* handle = pool_->take();
  struct curl_slist* headers = header_list(request);
  curl_easy_setopt(handle, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  // Object keys are not file paths: "a/../b" is a key of its own, sent as it is.
  curl_easy_setopt(handle, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(handle, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout.count()));
  // A stalled transfer: under a byte a second for the stall timeout.
  curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME,
                   std::max(1L, static_cast<long>(options_.stall_timeout.count() / 1000)));
  set_method(handle, request, transfer);

  const auto started = std::chrono::steady_clock::now();
  const CURLcode code = curl_easy_perform(handle);
  if (code != CURLE_OK) {
    response.status = 0;
    response.permanent = transfer.overflowed;
    response.transport_error = transfer.overflowed
                                   ? fmt::format("the server sent more bytes than the {} asked for",
                                                 request.body_into.size())
                                   : fmt::format("{} ({})", curl_easy_strerror(code), without_query(request.url));
  } else {
    long status = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
    response.status = status;
  }
  curl_slist_free_all(headers);
  pool_->give_back(handle);
  log_request(request, response, std::chrono::steady_clock::now() - started);
  return response;
}

std::string uri_encode(std::string_view text, bool keep_slash) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(c);
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

}  // namespace reshard::storage_detail
