// Finding the store for a place, with the options every driver shares.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "reshard/storage/location.h"
#include "reshard/storage/store.h"

namespace reshard::storage {

// How stores over a network behave. Credentials, regions and endpoints come
// from the environment, as each store's own tools take them (docs/storage.md).
struct StoreOptions {
  // A request that makes no progress for this long fails; failed requests are
  // retried with exponential backoff and jitter until this much time has
  // passed without progress.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  // Requests in flight at once for the ranges of one read_ranges call.
  uint32_t concurrency = 8;
  // S3: an endpoint that overrides the environment's ("http://127.0.0.1:8333").
  std::string s3_endpoint;
  // GCS: an endpoint that overrides the environment's.
  std::string gcs_endpoint;
};

// The store holding `where`: the local file system for local paths, and one
// shared client per scheme and options for object stores. Error(kInvalidArgument)
// for a scheme this build cannot reach.
std::shared_ptr<Store> open_store(const Location& where, const StoreOptions& options);
// The same with the process's default options (what every reader and writer
// of the formats and pipelines uses).
std::shared_ptr<Store> open_store(const Location& where);

// The options open_store(where) uses: a front end sets them from its own
// (the command line's --timeout). Thread safe.
void set_default_store_options(const StoreOptions& options);
StoreOptions default_store_options();

}  // namespace reshard::storage
