// Where the GCS JSON API answers: the caller's endpoint, the emulator that
// STORAGE_EMULATOR_HOST names (as Google's own clients read it), or Google.
#pragma once

#include <string>

#include "reshard/storage/open_store.h"

namespace reshard::storage_detail {

struct GcsEndpoint {
  std::string url;  // "https://storage.googleapis.com", no trailing '/'
  // STORAGE_EMULATOR_HOST is set (whichever endpoint wins): requests carry
  // no credentials, as with google-cloud-storage's clients.
  bool emulator = false;
};

// StoreOptions::gcs_endpoint, else STORAGE_EMULATOR_HOST ("http://host:port"
// or "host:port", taken as http), else https://storage.googleapis.com.
// Error(kInvalidArgument) for an endpoint with a query or a scheme other than
// http and https.
GcsEndpoint resolve_gcs_endpoint(const storage::StoreOptions& options);

}  // namespace reshard::storage_detail
