// UTF-8 validation with the rules of Rust's std::str::from_utf8 (no overlong
// forms, no surrogates, nothing past U+10FFFF).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace reshard::formats_detail {

// The offset of the first byte that starts an invalid sequence, or nullopt.
std::optional<size_t> first_invalid_utf8(std::string_view text);

}  // namespace reshard::formats_detail
