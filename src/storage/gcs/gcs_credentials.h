// Credentials found the way Application Default Credentials find them:
// GOOGLE_APPLICATION_CREDENTIALS, then gcloud's application default
// credentials file, then the metadata server. Files are read, never written.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "storage/gcs/gcs_token_cache.h"
#include "storage/http/http_client.h"

namespace reshard::storage_detail {

class GcsCredentials {
 public:
  // No credentials: requests go without an Authorization header (the emulator).
  static std::shared_ptr<GcsCredentials> none();
  // The first source the environment offers. A credential file that is named
  // or present but unreadable or malformed is Error(kInvalidConfig) now; the
  // metadata server is asked on first use, and its silence then is
  // Error(kAccessDenied) listing every source tried. `timeout` bounds each
  // token request's retries.
  static std::shared_ptr<GcsCredentials> from_environment(std::chrono::milliseconds timeout);

  // "Bearer TOKEN", fetched or cached (thread safe); nullopt without credentials.
  std::optional<std::string> authorization();
  // Whether requests carry a token at all.
  bool has_tokens() const { return tokens_ != nullptr; }
  // Forgets the cached token (the store answered 401).
  void invalidate();
  // Where the credentials came from ("the service account key file PATH
  // (GOOGLE_APPLICATION_CREDENTIALS)"): what 401/403 messages name.
  const std::string& source() const { return source_; }

  GcsCredentials(std::string source, std::shared_ptr<TokenCache> tokens)
      : source_(std::move(source)), tokens_(std::move(tokens)) {}

 private:
  std::string source_;
  std::shared_ptr<TokenCache> tokens_;  // null: no credentials
};

}  // namespace reshard::storage_detail
