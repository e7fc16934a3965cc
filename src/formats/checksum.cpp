#include "reshard/formats/checksum.h"

#include <xxhash.h>

#include <fmt/format.h>

namespace reshard {

uint64_t xxh64(std::span<const std::byte> bytes) { return XXH64(bytes.data(), bytes.size(), 0); }

uint64_t xxh64(std::string_view text) { return XXH64(text.data(), text.size(), 0); }

Xxh64Stream::Xxh64Stream() : state_(XXH64_createState()) { XXH64_reset(static_cast<XXH64_state_t*>(state_), 0); }

Xxh64Stream::~Xxh64Stream() { XXH64_freeState(static_cast<XXH64_state_t*>(state_)); }

void Xxh64Stream::update(std::span<const std::byte> bytes) {
  XXH64_update(static_cast<XXH64_state_t*>(state_), bytes.data(), bytes.size());
}

uint64_t Xxh64Stream::digest() const { return XXH64_digest(static_cast<const XXH64_state_t*>(state_)); }

std::string checksum_hex(uint64_t value) { return fmt::format("{:016x}", value); }

std::optional<uint64_t> parse_checksum_hex(std::string_view text) {
  if (text.size() != 16) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) return std::nullopt;
    value = (value << 4) | static_cast<uint64_t>(digit);
  }
  return value;
}

}  // namespace reshard
