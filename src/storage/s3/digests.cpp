#include "storage/s3/digests.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "reshard/layout/error.h"

namespace reshard::storage_detail {
namespace {

template <size_t N>
std::array<unsigned char, N> digest(const EVP_MD* type, const void* data, size_t size, const char* what) {
  std::array<unsigned char, N> out{};
  unsigned int length = 0;
  if (EVP_Digest(data, size, out.data(), &length, type, nullptr) != 1 || length != N) {
    throw Error(ErrorCode::kIo, std::string("OpenSSL could not compute ") + what);
  }
  return out;
}

}  // namespace

std::string hex(std::span<const unsigned char> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const unsigned char b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

std::string sha256_hex(std::span<const std::byte> bytes) {
  return hex(digest<32>(EVP_sha256(), bytes.data(), bytes.size(), "a SHA-256 digest"));
}

std::string sha256_hex(std::string_view text) { return sha256_hex(std::as_bytes(std::span(text))); }

Sha256Digest hmac_sha256(std::span<const unsigned char> key, std::string_view message) {
  Sha256Digest out{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(), &length) == nullptr ||
      length != out.size()) {
    throw Error(ErrorCode::kIo, "OpenSSL could not compute an HMAC-SHA256");
  }
  return out;
}

std::string md5_hex(std::string_view bytes) {
  return hex(digest<16>(EVP_md5(), bytes.data(), bytes.size(), "an MD5 digest"));
}

}  // namespace reshard::storage_detail
