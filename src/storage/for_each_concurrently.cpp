#include "storage/for_each_concurrently.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace reshard::storage_detail {

void for_each_concurrently(size_t threads, size_t n, const std::function<void(size_t)>& work) {
  std::atomic<size_t> next{0};
  std::mutex mutex;
  std::exception_ptr failure;
  auto run = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        work(i);
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(n, threads); ++t) pool.emplace_back(run);
  run();
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace reshard::storage_detail
