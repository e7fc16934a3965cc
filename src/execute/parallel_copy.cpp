#include "parallel_copy.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <thread>
#include <utility>
#include <vector>

#include "layout/copy_bytes.h"

namespace reshard::execute_detail {

using layout_detail::BoxCopy;
using layout_detail::copy_bytes;
using layout_detail::copy_rows;
using layout_detail::copy_rows_together;
using layout_detail::CopyMode;
using layout_detail::finish_streaming;
using layout_detail::RowsCopy;

namespace {

// Rows shorter than this gain from being walked in lockstep with the copies
// that share their buffer; longer ones are copied alone, split by bytes.
constexpr uint64_t kShortRow = uint64_t{64} << 10;

// Copies this large overflow any cache, so their destinations are written
// around it (as memcpy does for large sizes).
constexpr uint64_t kStreamingBytes = uint64_t{32} << 20;

// A lockstep group whose members' rows differ in size walks its shared
// buffer in blocks of about this many bytes: each job copies its rows of one
// block before the next job does, so the block is read from cache by all but
// the first. (Members of equal rows go row by row across the group in one
// fused loop instead, copy_rows_together: the shared buffer is then read
// strictly in order, which the blocks' strided reads of each row part are
// not: 8 strips of 512-byte rows, one thread, 14.4 GB/s in 16 KiB blocks,
// 20 row by row, 21.7 for a streaming copy of the same bytes.)
constexpr uint64_t kLockstepBlockBytes = uint64_t{16} << 10;

// Copies whose short rows interleave in one shared buffer (e.g. the column
// strips one source shard sends to several targets): walked together, block
// by block, so that buffer is read (or written) front to back instead of in
// page-hopping strides. A group of one is a plain copy.
struct CopyGroup {
  std::vector<const CopyJob*> jobs;
  uint64_t row_unit = 0;  // bytes of one row of every job together
  uint64_t bytes = 0;
  bool equal_rows = false;  // every member's rows are row_unit / members bytes
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
    g.equal_rows = std::all_of(g.jobs.begin(), g.jobs.end(), [&](const CopyJob* job) {
      return job->copy.row_bytes() == g.jobs[0]->copy.row_bytes();
    });
  }
  return groups;
}

// Rows [first, last) of every job of a lockstep group of equal rows, row by
// row across the jobs, a stretch of rows that step evenly in every job at a time.
void copy_group_rows_together(const CopyGroup& group, std::vector<BoxCopy::RowCursor>& cursors, uint64_t first,
                              uint64_t last, CopyMode mode) {
  std::vector<RowsCopy> copies(group.jobs.size());
  const size_t row_bytes = group.jobs[0]->copy.row_bytes();
  for (uint64_t row = first; row < last;) {
    uint64_t even = last - row;
    for (const BoxCopy::RowCursor& cursor : cursors) even = std::min(even, cursor.even_steps());
    for (size_t j = 0; j < cursors.size(); ++j) {
      const BoxCopy::RowCursor& cursor = cursors[j];
      copies[j] = RowsCopy{group.jobs[j]->dst + cursor.dst(), cursor.dst_step(), group.jobs[j]->src + cursor.src(),
                           cursor.src_step()};
    }
    copy_rows_together(copies, row_bytes, even, mode);
    for (BoxCopy::RowCursor& cursor : cursors) cursor.skip(even);
    row += even;
  }
}

// Rows [first, last) of every job of a lockstep group, a block of rows at a time.
void copy_group_rows_in_blocks(const CopyGroup& group, std::vector<BoxCopy::RowCursor>& cursors, uint64_t first,
                               uint64_t last, CopyMode mode) {
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

// Rows [first, last) of every job of a lockstep group.
void copy_group_rows(const CopyGroup& group, uint64_t first, uint64_t last, CopyMode mode) {
  if (first >= last) return;
  std::vector<BoxCopy::RowCursor> cursors;
  cursors.reserve(group.jobs.size());
  for (const CopyJob* job : group.jobs) cursors.emplace_back(job->copy, first);
  if (group.equal_rows) {
    copy_group_rows_together(group, cursors, first, last, mode);
  } else {
    copy_group_rows_in_blocks(group, cursors, first, last, mode);
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

}  // namespace reshard::execute_detail
