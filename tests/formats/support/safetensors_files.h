// Helpers for safetensors tests: scratch folders, raw file bytes, crafted
// headers and SHA-256.
#pragma once

#include <cstddef>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace reshard::testing {

// A fresh folder under the system temp folder, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// The whole file as bytes.
std::vector<std::byte> read_file_bytes(const std::filesystem::path& path);
std::string read_file_text(const std::filesystem::path& path);
void write_file_text(const std::filesystem::path& path, std::string_view bytes);

// `json` preceded by its length, 8 bytes little-endian: a crafted file start.
std::string with_length_prefix(std::string_view json);

// Lowercase hex SHA-256 of `bytes`.
std::string sha256_hex(std::span<const std::byte> bytes);

// `n` random bytes.
std::vector<std::byte> random_bytes(std::mt19937_64& rng, size_t n);

// Bytes of a string, as a span.
inline std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

}  // namespace reshard::testing
