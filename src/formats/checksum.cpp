#include "formats/checksum.h"

#include <xxhash.h>

#include <algorithm>

#include <fmt/format.h>

namespace reshard::formats_detail {

uint64_t xxh64(std::span<const std::byte> bytes) { return XXH64(bytes.data(), bytes.size(), 0); }

uint64_t xxh64(std::string_view text) { return XXH64(text.data(), text.size(), 0); }

Xxh64Stream::Xxh64Stream() : state_(XXH64_createState()) { XXH64_reset(static_cast<XXH64_state_t*>(state_), 0); }

Xxh64Stream::~Xxh64Stream() { XXH64_freeState(static_cast<XXH64_state_t*>(state_)); }

void Xxh64Stream::update(std::span<const std::byte> bytes) {
  XXH64_update(static_cast<XXH64_state_t*>(state_), bytes.data(), bytes.size());
}

uint64_t Xxh64Stream::digest() const { return XXH64_digest(static_cast<const XXH64_state_t*>(state_)); }

void Xxh64Stream::reset() { XXH64_reset(static_cast<XXH64_state_t*>(state_), 0); }

BlockHasher::BlockHasher(uint64_t block_bytes) : block_bytes_(block_bytes) {}

void BlockHasher::update(std::span<const std::byte> bytes) {
  if (block_bytes_ == 0) {
    whole_.update(bytes);
    return;
  }
  while (!bytes.empty()) {
    const size_t take = static_cast<size_t>(std::min<uint64_t>(bytes.size(), block_bytes_ - in_block_));
    const std::span<const std::byte> piece = bytes.first(take);
    if (in_block_ == 0 && take == block_bytes_) {
      blocks_.push_back(xxh64(piece));  // a whole block at once: the one-shot hash is faster
    } else {
      block_.update(piece);
      in_block_ += take;
      if (in_block_ == block_bytes_) {
        blocks_.push_back(block_.digest());
        block_.reset();
        in_block_ = 0;
      }
    }
    whole_.update(piece);
    bytes = bytes.subspan(take);
  }
}

BlockChecksums BlockHasher::finish() {
  if (in_block_ > 0) {
    blocks_.push_back(block_.digest());
    block_.reset();
    in_block_ = 0;
  }
  return {whole_.digest(), std::move(blocks_)};
}

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

}  // namespace reshard::formats_detail
