// Checksums of stored bytes: xxHash64, written as 16 lowercase hex digits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace reshard::formats_detail {

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
  // Starts over, as if just made.
  void reset();

 private:
  void* state_;
};

// The checksums of a run of bytes: of all of it, and of each block of it.
struct BlockChecksums {
  uint64_t whole = 0;
  std::vector<uint64_t> blocks;  // of each `block_bytes` bytes, the last shorter
  bool operator==(const BlockChecksums&) const = default;
};

// Both kinds of checksum in one pass over bytes given in pieces of any size:
// each block is hashed, then fed to the whole's hash while still in cache.
class BlockHasher {
 public:
  // `block_bytes` 0: the whole checksum only.
  explicit BlockHasher(uint64_t block_bytes);
  void update(std::span<const std::byte> bytes);
  // The checksums of everything given so far (an empty run has no blocks).
  BlockChecksums finish();

 private:
  uint64_t block_bytes_;
  uint64_t in_block_ = 0;  // bytes of the current, unfinished block
  Xxh64Stream whole_;
  Xxh64Stream block_;
  std::vector<uint64_t> blocks_;
};

// "0123456789abcdef": always 16 digits.
std::string checksum_hex(uint64_t value);
// The value of 16 lowercase hex digits, or nullopt for anything else.
std::optional<uint64_t> parse_checksum_hex(std::string_view text);

}  // namespace reshard::formats_detail
