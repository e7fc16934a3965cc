// The Google Cloud Storage driver, over its JSON API: media and multipart
// uploads, ranged reads, listing, and compose for parallel uploads.
#pragma once

#include <memory>

#include "reshard/storage/open_store.h"
#include "reshard/storage/store.h"

namespace reshard::storage_detail {

// A client for every bucket of GCS (or the emulator STORAGE_EMULATOR_HOST names).
std::shared_ptr<storage::Store> make_gcs_store(const storage::StoreOptions& options);

}  // namespace reshard::storage_detail
