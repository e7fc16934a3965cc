#include "reshard/storage/open_store.h"

#include <map>
#include <mutex>
#include <tuple>

#include "storage/gcs/gcs_store.h"
#include "storage/local/local_store.h"
#include "storage/memory/memory_store.h"
#include "storage/s3/s3_store.h"

namespace reshard::storage {
namespace {

// One client per scheme and options: clients keep connections and tokens.
using ClientKey = std::tuple<Scheme, int64_t, uint32_t, std::string, std::string>;

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
                      options.gcs_endpoint};
  const std::lock_guard lock(mutex);
  std::shared_ptr<Store>& client = clients[key];
  if (!client) {
    client = where.scheme() == Scheme::kS3 ? storage_detail::make_s3_store(options)
                                           : storage_detail::make_gcs_store(options);
  }
  return client;
}

}  // namespace reshard::storage
