// Local files as a store: positional reads, and writes into a temporary
// sibling that is fsynced and renamed into place.
#pragma once

#include <memory>

#include "reshard/storage/store.h"

namespace reshard::storage_detail {

// The one local store (it holds no state of its own).
std::shared_ptr<storage::Store> local_store();

}  // namespace reshard::storage_detail
