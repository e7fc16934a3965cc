// An in-process store for tests: objects in memory, with the object stores'
// rules (no rename, whole-object writes, parts of at least a minimum size).
#pragma once

#include <memory>

#include "reshard/storage/store.h"

namespace reshard::storage_detail {

// The process's one memory store: memory://BUCKET/KEY, every bucket there.
std::shared_ptr<storage::Store> memory_store();

}  // namespace reshard::storage_detail
