// Many small server-side requests (composes, deletes) at once: they need no
// bandwidth, only round trips.
#pragma once

#include <cstddef>
#include <functional>

namespace reshard::storage_detail {

// How many such requests a GCS driver keeps in flight.
inline constexpr size_t kRequestsAtOnce = 8;

// Runs work(i) for every i in [0, n) on up to `threads` threads (the caller's
// among them). After the first exception no new item starts; it is rethrown
// once every thread has stopped.
void for_each_concurrently(size_t threads, size_t n, const std::function<void(size_t)>& work);

}  // namespace reshard::storage_detail
