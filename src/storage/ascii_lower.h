// ASCII lower-casing for the case-insensitive words the stores' protocols
// use (URL schemes, HTTP header names, "true" in configuration): independent
// of the C locale, which std::tolower follows.
#pragma once

#include <string>
#include <string_view>

namespace reshard::storage_detail {

inline std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace reshard::storage_detail
