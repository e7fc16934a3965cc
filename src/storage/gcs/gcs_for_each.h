// Many small server-side requests (composes, deletes) at once: they need no
// bandwidth, only round trips.
#pragma once

#include <cstddef>

#include "storage/for_each_concurrently.h"

namespace reshard::storage_detail {

// How many such requests a GCS driver keeps in flight.
inline constexpr size_t kRequestsAtOnce = 8;

}  // namespace reshard::storage_detail
