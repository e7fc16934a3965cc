#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "layout/checked.h"
#include "pipelines/import/import_fill.h"

namespace reshard::pipelines_detail {

std::vector<ShardedArray> fill_import_tensors(const ImportPlan& plan, const ImportSource& source,
                                              const Topology& topology, int process, size_t tensors_in_flight,
                                              FillStats& stats, const std::function<void(uint64_t)>& progress) {
  const size_t count = plan.map.outputs.size();
  const size_t workers = source.has_views() ? 1 : std::max<size_t>(1, std::min(tensors_in_flight, count));
  std::vector<std::optional<ShardedArray>> arrays(count);
  std::vector<std::exception_ptr> failures(count);
  std::vector<FillStats> worker_stats(workers);
  std::mutex progress_mutex;
  const std::function<void(uint64_t)> report = [&](uint64_t bytes) {
    if (!progress) return;
    const std::lock_guard lock(progress_mutex);
    progress(bytes);
  };
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  const auto work = [&](FillStats& mine) {
    // After a failure no new tensor starts: its error is the one reported.
    for (size_t t = next++; t < count && !failed; t = next++) {
      try {
        arrays[t] = fill_import_tensor(plan, t, source, topology, process, mine, report);
      } catch (...) {
        failures[t] = std::current_exception();
        failed = true;
      }
    }
  };
  if (workers == 1) {
    work(worker_stats[0]);
  } else {
    std::vector<std::jthread> threads;
    threads.reserve(workers);
    for (size_t w = 0; w < workers; ++w) threads.emplace_back([&, w] { work(worker_stats[w]); });
  }
  for (const std::exception_ptr& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
  std::vector<ShardedArray> out;
  out.reserve(count);
  for (std::optional<ShardedArray>& array : arrays) out.push_back(std::move(*array));
  for (const FillStats& s : worker_stats) {
    stats.bytes_read = checked_add(stats.bytes_read, s.bytes_read, "bytes read");
    stats.bytes_made = checked_add(stats.bytes_made, s.bytes_made, "bytes made");
  }
  return out;
}

}  // namespace reshard::pipelines_detail
