#include "storage/range_reads.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>

#include "layout/checked.h"

namespace reshard::storage_detail {

using layout_detail::checked_add;

std::vector<CoalescedRead> coalesce_ranges(std::span<const storage::RangeRead> ranges, uint64_t max_gap,
                                           uint64_t max_request) {
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a].offset < ranges[b].offset; });
  std::vector<CoalescedRead> reads;
  for (const size_t i : order) {
    const uint64_t start = ranges[i].offset;
    const uint64_t end = checked_add(start, static_cast<uint64_t>(ranges[i].out.size()), "a read's end");
    if (!reads.empty()) {
      CoalescedRead& last = reads.back();
      const uint64_t last_end = last.offset + last.size;
      const uint64_t joined_end = std::max(last_end, end);
      if (start <= last_end + max_gap && joined_end - last.offset <= max_request) {
        last.size = joined_end - last.offset;
        last.members.push_back(i);
        continue;
      }
    }
    reads.push_back(CoalescedRead{start, end - start, {i}});
  }
  return reads;
}

void read_ranges_concurrently(std::span<const storage::RangeRead> ranges, uint32_t concurrency,
                              const std::function<void(uint64_t, std::span<std::byte>)>& read_one,
                              uint64_t max_gap, uint64_t max_request) {
  const std::vector<CoalescedRead> reads = coalesce_ranges(ranges, max_gap, max_request);
  std::atomic<size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto work = [&] {
    std::vector<std::byte> scratch;
    for (size_t r = next++; r < reads.size(); r = next++) {
      {
        const std::lock_guard lock(failure_mutex);
        if (failure) return;
      }
      const CoalescedRead& read = reads[r];
      try {
        if (read.members.size() == 1 && ranges[read.members[0]].out.size() == read.size) {
          read_one(read.offset, ranges[read.members[0]].out);  // straight into the caller's memory
          continue;
        }
        scratch.resize(read.size);
        read_one(read.offset, scratch);
        for (const size_t i : read.members) {
          const storage::RangeRead& range = ranges[i];
          if (!range.out.empty()) std::memcpy(range.out.data(), scratch.data() + (range.offset - read.offset), range.out.size());
        }
      } catch (...) {
        const std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  const size_t threads = std::min<size_t>(std::max<uint32_t>(concurrency, 1), reads.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace reshard::storage_detail
