// SHA-256 of a byte stream, in lower-case hex (OpenSSL's implementation).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace reshard::cli {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  // Adds the next bytes.
  void update(std::span<const std::byte> bytes);
  // The digest of everything added, as 64 hex digits. Ends the stream.
  std::string hex_digest();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

}  // namespace reshard::cli
