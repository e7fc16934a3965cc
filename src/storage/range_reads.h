// Many byte ranges of one object, fetched as few requests as the gaps allow
// and as many at once as the store's concurrency allows: what the network
// drivers' read_ranges share.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "reshard/storage/store.h"

namespace reshard::storage_detail {

// One request covering one or more of the caller's ranges.
struct CoalescedRead {
  uint64_t offset = 0;
  uint64_t size = 0;
  std::vector<size_t> members;  // indices into the caller's ranges
};

// Groups `ranges` (in any order) into requests: ranges that overlap or lie
// less than `max_gap` bytes apart join one request, up to `max_request` bytes
// (a range larger than that is a request of its own).
std::vector<CoalescedRead> coalesce_ranges(std::span<const storage::RangeRead> ranges, uint64_t max_gap,
                                           uint64_t max_request);

// Reads every range with `read_one(offset, out)` (a store's single ranged
// read), coalescing as above, `concurrency` requests at once. The first
// failure is rethrown once every request in flight has ended.
void read_ranges_concurrently(std::span<const storage::RangeRead> ranges, uint32_t concurrency,
                              const std::function<void(uint64_t, std::span<std::byte>)>& read_one,
                              uint64_t max_gap = 64 << 10, uint64_t max_request = 16 << 20);

}  // namespace reshard::storage_detail
