#include <algorithm>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "layout/checked.h"
#include "pipelines/import/import_fill.h"
#include "storage/for_each_concurrently.h"

namespace reshard::pipelines_detail {

using layout_detail::checked_add;

std::vector<ShardedArray> fill_import_tensors(const ImportPlan& plan, const ImportSource& source,
                                              const Topology& topology, int process, size_t tensors_in_flight,
                                              FillStats& stats, const std::function<void(uint64_t)>& progress) {
  const size_t count = plan.map.outputs.size();
  const size_t threads = source.has_views() ? 1 : std::max<size_t>(1, tensors_in_flight);
  std::vector<std::optional<ShardedArray>> arrays(count);
  std::vector<FillStats> tensor_stats(count);
  std::mutex progress_mutex;
  const std::function<void(uint64_t)> report = [&](uint64_t bytes) {
    if (!progress) return;
    const std::lock_guard lock(progress_mutex);
    progress(bytes);
  };
  storage_detail::for_each_concurrently(threads, count, [&](size_t t) {
    arrays[t] = fill_import_tensor(plan, t, source, topology, process, tensor_stats[t], report);
  });
  std::vector<ShardedArray> out;
  out.reserve(count);
  for (std::optional<ShardedArray>& array : arrays) out.push_back(std::move(*array));
  for (const FillStats& s : tensor_stats) {
    stats.bytes_read = checked_add(stats.bytes_read, s.bytes_read, "bytes read");
    stats.bytes_made = checked_add(stats.bytes_made, s.bytes_made, "bytes made");
  }
  return out;
}

}  // namespace reshard::pipelines_detail
