// Checksums of stored bytes: xxHash64, written as 16 lowercase hex digits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace reshard {

// XXH64 (seed 0) of `bytes`.
uint64_t xxh64(std::span<const std::byte> bytes);
uint64_t xxh64(std::string_view text);

// Incremental XXH64 over pieces given in order.
class Xxh64Stream {
 public:
  Xxh64Stream();
  ~Xxh64Stream();
  Xxh64Stream(const Xxh64Stream&) = delete;
  Xxh64Stream& operator=(const Xxh64Stream&) = delete;
  void update(std::span<const std::byte> bytes);
  uint64_t digest() const;

 private:
  void* state_;
};

// "0123456789abcdef": always 16 digits.
std::string checksum_hex(uint64_t value);
// The value of 16 lowercase hex digits, or nullopt for anything else.
std::optional<uint64_t> parse_checksum_hex(std::string_view text);

}  // namespace reshard
