#include "parallel_copy.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <thread>
#include <utility>
#include <vector>

namespace reshard {
namespace {

// Rows shorter than this gain from being walked in lockstep with the copies
// that share their buffer; longer ones are copied alone, split by bytes.
constexpr uint64_t kShortRow = uint64_t{64} << 10;

// Copies this large overflow any cache, so their destinations are written
// around it (as memcpy does for large sizes).
constexpr uint64_t kStreamingBytes = uint64_t{32} << 20;

// A lockstep group walks its shared buffer in blocks of about this many
// bytes: each job copies its rows of one block before the next job does, so
// the block is read from cache by all but the first, and each job's other
// buffer is written in runs of several rows. (Row by row, a thread writes to
// as many streams at once as the group has jobs, more than the CPU keeps
// write-combining buffers for, and pays a call per row: 0.87x of a streaming
// copy for 8 jobs of 512-byte rows. In blocks of 16 KiB, which stay in the
// first-level cache, each job's rows of a block in one call: 0.99-1.03x;
// blocks of 8 or 64 KiB: 0.93-0.97x.)
constexpr uint64_t kLockstepBlockBytes = uint64_t{16} << 10;

// Copies whose short rows interleave in one shared buffer (e.g. the column
// strips one source shard sends to several targets): walked together, block
// by block, so that buffer is read (or written) front to back instead of in
// page-hopping strides. A group of one is a plain copy.
struct CopyGroup {
  std::vector<const CopyJob*> jobs;
  uint64_t row_unit = 0;  // bytes of one row of every job together
  uint64_t bytes = 0;
};

// The buffer whose rows a job hops between (the strided side: where walking
// several jobs together pays), how it hops, and which buffer it is.
using GroupKey = std::tuple<BoxCopy::Side, const std::byte*, std::vector<int64_t>>;

GroupKey group_key(const CopyJob& job) {
  const auto side = job.copy.rows_adjacent(BoxCopy::Side::kSrc) ? BoxCopy::Side::kDst : BoxCopy::Side::kSrc;
  return {side, side == BoxCopy::Side::kSrc ? job.src : job.dst, job.copy.walk_key(side)};
}

// Groups jobs with short rows that hop through one buffer in the same way;
// everything else stays alone.
std::vector<CopyGroup> group_jobs(std::span<const CopyJob> jobs) {
  std::vector<CopyGroup> groups;
  std::map<GroupKey, std::vector<const CopyJob*>> lockstep;
  for (const CopyJob& job : jobs) {
    if (job.copy.bytes() == 0) continue;
    if (job.copy.row_bytes() >= kShortRow) {
      groups.push_back(CopyGroup{{&job}, job.copy.row_bytes(), job.copy.bytes()});
    } else {
      lockstep[group_key(job)].push_back(&job);
    }
  }
  for (auto& [key, members] : lockstep) groups.push_back(CopyGroup{std::move(members), 0, 0});
  for (CopyGroup& g : groups) {
    if (g.bytes > 0) continue;
    // Members in buffer order: sorted by their first row's offsets.
    std::sort(g.jobs.begin(), g.jobs.end(), [](const CopyJob* a, const CopyJob* b) {
      const BoxCopy::RowCursor ra(a->copy, 0), rb(b->copy, 0);
      return std::pair(ra.src(), ra.dst()) < std::pair(rb.src(), rb.dst());
    });
    for (const CopyJob* job : g.jobs) {
      g.row_unit += job->copy.row_bytes();
      g.bytes += job->copy.bytes();
    }
  }
  return groups;
}

// Rows [first, last) of every job of a lockstep group, a block of rows at a time.
void copy_group_rows(const CopyGroup& group, uint64_t first, uint64_t last, CopyMode mode) {
  if (first >= last) return;
  std::vector<BoxCopy::RowCursor> cursors;
  cursors.reserve(group.jobs.size());
  for (const CopyJob* job : group.jobs) cursors.emplace_back(job->copy, first);
  const uint64_t block_rows = std::max<uint64_t>(1, kLockstepBlockBytes / group.row_unit);
  for (uint64_t block = first; block < last; block += block_rows) {
    const uint64_t block_end = std::min(last, block + block_rows);
    for (size_t j = 0; j < cursors.size(); ++j) {
      const CopyJob& job = *group.jobs[j];
      BoxCopy::RowCursor& cursor = cursors[j];
      for (uint64_t rows = block_end - block; rows > 0;) {
        const uint64_t even = std::min(rows, cursor.even_steps());
        copy_rows(job.dst + cursor.dst(), cursor.dst_step(), job.src + cursor.src(), cursor.src_step(),
                  job.copy.row_bytes(), even, mode);
        cursor.skip(even);
        rows -= even;
      }
    }
  }
}

// Bytes [begin, end) of one group, in its own order (rows for lockstep groups,
// rounded to the nearest row so that neighbouring ranges meet exactly).
void copy_part_of_group(const CopyGroup& group, uint64_t begin, uint64_t end, CopyMode mode) {
  if (group.jobs.size() == 1) {
    group.jobs[0]->copy.copy(group.jobs[0]->src, group.jobs[0]->dst, begin, end, mode);
    return;
  }
  const auto nearest_row = [&](uint64_t byte) { return (byte + group.row_unit / 2) / group.row_unit; };
  copy_group_rows(group, nearest_row(begin), nearest_row(end), mode);
}

// Bytes [begin, end) of all groups concatenated.
void copy_range(const std::vector<CopyGroup>& groups, std::span<const uint64_t> starts, uint64_t begin, uint64_t end,
                CopyMode mode) {
  auto it = std::upper_bound(starts.begin(), starts.end(), begin);
  for (auto g = static_cast<size_t>(it - starts.begin()) - 1; g < groups.size() && starts[g] < end; ++g) {
    const uint64_t from = std::max(begin, starts[g]) - starts[g];
    const uint64_t to = std::min(end, starts[g] + groups[g].bytes) - starts[g];
    copy_part_of_group(groups[g], from, to, mode);
  }
  if (mode == CopyMode::kStreaming) finish_streaming();
}

}  // namespace

void run_copies(std::span<const CopyJob> jobs, int threads, uint64_t min_bytes_per_thread,
                std::optional<CopyMode> mode) {
  const std::vector<CopyGroup> groups = group_jobs(jobs);
  std::vector<uint64_t> starts;
  starts.reserve(groups.size());
  uint64_t total = 0;
  for (const CopyGroup& g : groups) {
    starts.push_back(total);
    total += g.bytes;
  }
  if (total == 0) return;
  const uint64_t by_size = std::max<uint64_t>(1, total / std::max<uint64_t>(1, min_bytes_per_thread));
  const uint64_t parts = std::min<uint64_t>(static_cast<uint64_t>(std::max(1, threads)), by_size);
  auto bound = [&](uint64_t part) { return total / parts * part + std::min(part, total % parts); };
  if (!mode) mode = total >= kStreamingBytes ? CopyMode::kStreaming : CopyMode::kCached;
  {
    std::vector<std::jthread> workers;
    for (uint64_t part = 1; part < parts; ++part) {
      workers.emplace_back([&, part] { copy_range(groups, starts, bound(part), bound(part + 1), *mode); });
    }
    copy_range(groups, starts, bound(0), bound(1), *mode);
  }  // the workers join here
}

}  // namespace reshard
