// The digests S3 requests need, over OpenSSL: SHA-256 (payload hashes),
// HMAC-SHA256 (Signature V4's keys) and MD5 (single-PUT ETags).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace reshard::storage_detail {

using Sha256Digest = std::array<unsigned char, 32>;

// Lower-case hex of `bytes`.
std::string hex(std::span<const unsigned char> bytes);

// Hex SHA-256 of `bytes` (lower case).
std::string sha256_hex(std::span<const std::byte> bytes);
std::string sha256_hex(std::string_view text);

Sha256Digest hmac_sha256(std::span<const unsigned char> key, std::string_view message);

// Hex MD5 of `bytes` (lower case).
std::string md5_hex(std::string_view bytes);

}  // namespace reshard::storage_detail
