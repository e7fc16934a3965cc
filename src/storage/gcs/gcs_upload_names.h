// Where a parallel upload's temporary objects live: every component and
// intermediate composite of an upload of KEY sits under
// "KEY.tmp-reshard-NONCE/", so that one listing of "KEY.tmp-reshard-" finds
// every upload ever started for KEY and never touches another key's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace reshard::storage_detail {

// "KEY.tmp-reshard-": the prefix of every upload of KEY.
std::string uploads_prefix(std::string_view key);
// "KEY.tmp-reshard-NONCE/": the prefix of one upload's objects.
std::string upload_prefix(std::string_view key, std::string_view nonce);
// Part `index`'s component: "KEY.tmp-reshard-NONCE/part-00042".
std::string component_name(std::string_view key, std::string_view nonce, uint32_t index);
// An intermediate composite of the compose tree: "KEY.tmp-reshard-NONCE/compose-1-00003".
std::string composite_name(std::string_view key, std::string_view nonce, uint32_t level, uint32_t index);

// The NONCE of an object named "KEY.tmp-reshard-NONCE/...", or empty for any other name.
std::string nonce_of(std::string_view key, std::string_view object_name);

// A fresh nonce (32 lower-case hex digits), and whether text is one.
std::string new_upload_nonce();
bool is_upload_nonce(std::string_view text);

}  // namespace reshard::storage_detail
