#include "storage/gcs/gcs_upload_names.h"

#include <fmt/format.h>

#include "storage/gcs/gcs_objects.h"

namespace reshard::storage_detail {
namespace {

constexpr std::string_view kMarker = ".tmp-reshard-";
constexpr size_t kNonceBytes = 16;

}  // namespace

std::string uploads_prefix(std::string_view key) { return fmt::format("{}{}", key, kMarker); }

std::string upload_prefix(std::string_view key, std::string_view nonce) {
  return fmt::format("{}{}{}/", key, kMarker, nonce);
}

std::string component_name(std::string_view key, std::string_view nonce, uint32_t index) {
  return fmt::format("{}part-{:05}", upload_prefix(key, nonce), index);
}

std::string composite_name(std::string_view key, std::string_view nonce, uint32_t level, uint32_t index) {
  return fmt::format("{}compose-{}-{:05}", upload_prefix(key, nonce), level, index);
}

std::string nonce_of(std::string_view key, std::string_view object_name) {
  const std::string prefix = uploads_prefix(key);
  if (!object_name.starts_with(prefix)) return {};
  const std::string_view rest = object_name.substr(prefix.size());
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return {};
  return std::string(rest.substr(0, slash));
}

std::string new_upload_nonce() { return random_hex(kNonceBytes); }

bool is_upload_nonce(std::string_view text) {
  if (text.size() != 2 * kNonceBytes) return false;
  for (const char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace reshard::storage_detail
