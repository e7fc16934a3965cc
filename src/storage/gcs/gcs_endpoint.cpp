#include "storage/gcs/gcs_endpoint.h"

#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::storage_detail {
namespace {

// "host:port" gets `default_scheme`; a trailing '/' is dropped.
std::string normal_url(std::string_view text, std::string_view default_scheme, std::string_view from) {
  std::string url(text);
  if (url.find("://") == std::string::npos) url = fmt::format("{}://{}", default_scheme, url);
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (!url.starts_with("http://") && !url.starts_with("https://")) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} {:?} is not an http:// or https:// endpoint", from, std::string(text)));
  }
  if (url.find_first_of("?#") != std::string::npos || url.size() == url.find("://") + 3) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} {:?} is not an endpoint (scheme://host[:port])", from, std::string(text)));
  }
  return url;
}

}  // namespace

GcsEndpoint resolve_gcs_endpoint(const storage::StoreOptions& options) {
  const char* emulator = std::getenv("STORAGE_EMULATOR_HOST");
  const bool has_emulator = emulator != nullptr && *emulator != '\0';
  if (!options.gcs_endpoint.empty()) {
    return GcsEndpoint{normal_url(options.gcs_endpoint, "https", "the GCS endpoint"), has_emulator};
  }
  if (has_emulator) return GcsEndpoint{normal_url(emulator, "http", "STORAGE_EMULATOR_HOST"), true};
  return GcsEndpoint{"https://storage.googleapis.com", false};
}

}  // namespace reshard::storage_detail
