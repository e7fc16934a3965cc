#include "reshard/storage/open_store.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "storage/gcs/gcs_store.h"
#include "storage/local/local_store.h"
#include "storage/memory/memory_store.h"
#include "storage/s3/s3_store.h"

namespace reshard::storage {
namespace {

// One client per scheme, options and environment: clients keep connections
// and tokens, and read their endpoint, region and credentials from the
// environment when made; a process that points the variables elsewhere (a
// test's own server, another profile) gets a client that follows them.
using ClientKey = std::tuple<Scheme, int64_t, uint32_t, std::string, std::string, std::string>;

// The variables the drivers read when a client is made, as one string.
std::string environment_fingerprint(Scheme scheme) {
  static constexpr const char* kS3[] = {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
                                        "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID",
                                        "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE",
                                        "AWS_SHARED_CREDENTIALS_FILE", "AWS_EC2_METADATA_DISABLED",
                                        "AWS_EC2_METADATA_SERVICE_ENDPOINT", "RESHARD_S3_ADDRESSING", "HOME"};
  static constexpr const char* kGcs[] = {"STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG",
                                         "GCE_METADATA_HOST", "HOME"};
  std::string fingerprint;
  const auto add = [&fingerprint](const char* name) {
    const char* value = std::getenv(name);
    fingerprint += value == nullptr ? std::string("\x01") : std::string(value);
    fingerprint += '\0';
  };
  if (scheme == Scheme::kS3) {
    for (const char* name : kS3) add(name);
  } else {
    for (const char* name : kGcs) add(name);
  }
  return fingerprint;
}

std::mutex defaults_mutex;
StoreOptions defaults;

}  // namespace

void set_default_store_options(const StoreOptions& options) {
  const std::lock_guard lock(defaults_mutex);
  defaults = options;
}

StoreOptions default_store_options() {
  const std::lock_guard lock(defaults_mutex);
  return defaults;
}

std::shared_ptr<Store> open_store(const Location& where) { return open_store(where, default_store_options()); }

std::shared_ptr<Store> open_store(const Location& where, const StoreOptions& options) {
  switch (where.scheme()) {
    case Scheme::kLocal: return storage_detail::local_store();
    case Scheme::kMemory: return storage_detail::memory_store();
    case Scheme::kS3:
    case Scheme::kGcs: break;
  }
  static std::mutex mutex;
  static std::map<ClientKey, std::shared_ptr<Store>> clients;
  const ClientKey key{where.scheme(), options.timeout.count(), options.concurrency, options.s3_endpoint,
                      options.gcs_endpoint, environment_fingerprint(where.scheme())};
  const std::lock_guard lock(mutex);
  std::shared_ptr<Store>& client = clients[key];
  if (!client) {
    client = where.scheme() == Scheme::kS3 ? storage_detail::make_s3_store(options)
                                           : storage_detail::make_gcs_store(options);
  }
  return client;
}

}  // namespace reshard::storage
