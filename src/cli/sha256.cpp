#include "cli/sha256.h"

#include <openssl/evp.h>

#include <array>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::cli {

struct Sha256::Context {
  EVP_MD_CTX* md = nullptr;
  ~Context() { EVP_MD_CTX_free(md); }
};

namespace {

[[noreturn]] void openssl_failed(const char* step) {
  throw Error(ErrorCode::kIo, fmt::format("sha256: OpenSSL {} failed", step));
}

}  // namespace

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  context_->md = EVP_MD_CTX_new();
  if (context_->md == nullptr || EVP_DigestInit_ex(context_->md, EVP_sha256(), nullptr) != 1) {
    openssl_failed("init");
  }
}

Sha256::~Sha256() = default;

void Sha256::update(std::span<const std::byte> bytes) {
  if (EVP_DigestUpdate(context_->md, bytes.data(), bytes.size()) != 1) openssl_failed("update");
}

std::string Sha256::hex_digest() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_->md, digest.data(), &length) != 1) openssl_failed("final");
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace reshard::cli
