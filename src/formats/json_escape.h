// JSON strings escaped exactly as the safetensors reference (serde_json) writes them.
#pragma once

#include <string>
#include <string_view>

namespace reshard::formats_detail {

// Appends `text` as a quoted JSON string: \" \\ \b \t \n \f \r, other bytes
// below 0x20 as \u00xx (lowercase hex); everything else, '/' and non-ASCII
// UTF-8 included, is copied raw.
void append_json_string(std::string& out, std::string_view text);

// `text` as a quoted JSON string: how names are shown in error messages, so
// that quotes and control characters in them stay visible and unambiguous.
std::string json_quoted(std::string_view text);

}  // namespace reshard::formats_detail
