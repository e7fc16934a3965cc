#include "storage/gcs/gcs_jwt.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <memory>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reshard/layout/error.h"

namespace reshard::storage_detail {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

std::unique_ptr<EVP_PKEY, KeyFree> load_private_key(const ServiceAccountKey& key) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(key.private_key.data(), static_cast<int>(key.private_key.size())));
  if (!bio) throw Error(ErrorCode::kIo, "OpenSSL could not allocate a buffer");
  std::unique_ptr<EVP_PKEY, KeyFree> pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!pkey || EVP_PKEY_base_id(pkey.get()) != EVP_PKEY_RSA) {
    throw Error(ErrorCode::kInvalidConfig,
                fmt::format("the private key of service account {} is not a PEM RSA private key", key.client_email));
  }
  return pkey;
}

std::string sign_rs256(const ServiceAccountKey& key, std::string_view input) {
  const auto pkey = load_private_key(key);
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  size_t size = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey.get()) != 1 ||
      EVP_DigestSignUpdate(ctx.get(), input.data(), input.size()) != 1 ||
      EVP_DigestSignFinal(ctx.get(), nullptr, &size) != 1) {
    throw Error(ErrorCode::kIo, fmt::format("OpenSSL could not sign for service account {}", key.client_email));
  }
  std::vector<unsigned char> signature(size);
  if (EVP_DigestSignFinal(ctx.get(), signature.data(), &size) != 1) {
    throw Error(ErrorCode::kIo, fmt::format("OpenSSL could not sign for service account {}", key.client_email));
  }
  return std::string(reinterpret_cast<const char*>(signature.data()), size);
}

}  // namespace

std::string base64url(std::string_view bytes) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  uint32_t buffer = 0;
  int bits = 0;
  for (const char c : bytes) {
    buffer = (buffer << 8) | static_cast<unsigned char>(c);
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(buffer >> bits) & 0x3F]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(buffer << (6 - bits)) & 0x3F]);
  return out;
}

std::string service_account_assertion(const ServiceAccountKey& key, int64_t now_seconds) {
  const nlohmann::json header = {{"alg", "RS256"}, {"typ", "JWT"}, {"kid", key.private_key_id}};
  const nlohmann::json claims = {{"iss", key.client_email},
                                 {"scope", kGcsReadWriteScope},
                                 {"aud", key.token_uri},
                                 {"iat", now_seconds},
                                 {"exp", now_seconds + 3600}};
  const std::string signed_part = base64url(header.dump()) + "." + base64url(claims.dump());
  return signed_part + "." + base64url(sign_rs256(key, signed_part));
}

}  // namespace reshard::storage_detail
