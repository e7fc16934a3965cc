#include "reshard/execute/parallel_copy.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace reshard {
namespace {

// Copies bytes [begin, end) of the concatenation of all jobs, in job order.
void copy_range(std::span<const CopyJob> jobs, std::span<const uint64_t> job_starts, uint64_t begin,
                uint64_t end) {
  // The last job starting at or before `begin`.
  auto it = std::upper_bound(job_starts.begin(), job_starts.end(), begin);
  for (auto j = static_cast<size_t>(it - job_starts.begin()) - 1; j < jobs.size() && job_starts[j] < end; ++j) {
    const uint64_t from = std::max(begin, job_starts[j]) - job_starts[j];
    const uint64_t to = std::min(end, job_starts[j] + jobs[j].copy.bytes()) - job_starts[j];
    jobs[j].copy.copy(jobs[j].src, jobs[j].dst, from, to);
  }
}

}  // namespace

void run_copies(std::span<const CopyJob> jobs, int threads, uint64_t min_bytes_per_thread) {
  std::vector<uint64_t> job_starts;
  job_starts.reserve(jobs.size());
  uint64_t total = 0;
  for (const CopyJob& job : jobs) {
    job_starts.push_back(total);
    total += job.copy.bytes();
  }
  if (total == 0) return;
  const uint64_t by_size = std::max<uint64_t>(1, total / std::max<uint64_t>(1, min_bytes_per_thread));
  const uint64_t parts = std::min<uint64_t>(static_cast<uint64_t>(std::max(1, threads)), by_size);
  auto range = [&](uint64_t part) { return total / parts * part + std::min(part, total % parts); };
  {
    std::vector<std::jthread> workers;
    for (uint64_t part = 1; part < parts; ++part) {
      workers.emplace_back([&, part] { copy_range(jobs, job_starts, range(part), range(part + 1)); });
    }
    copy_range(jobs, job_starts, range(0), range(1));
  }  // the workers join here
}

}  // namespace reshard

