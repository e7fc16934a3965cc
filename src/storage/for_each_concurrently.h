// Many independent pieces of work that mostly wait (requests to a store, the
// ranged reads of one tensor each), run at once on a few threads.
#pragma once

#include <cstddef>
#include <functional>

namespace reshard::storage_detail {

// Runs work(i) for every i in [0, n) on up to `threads` threads (the caller's
// among them). After the first exception no new item starts; it is rethrown
// once every thread has stopped.
void for_each_concurrently(size_t threads, size_t n, const std::function<void(size_t)>& work);

}  // namespace reshard::storage_detail
