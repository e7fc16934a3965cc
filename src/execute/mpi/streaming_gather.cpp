#include "streaming_gather.h"

#include <algorithm>
#include <thread>
#include <tuple>
#include <vector>

#include "layout/copy_bytes.h"

namespace reshard::mpi_detail {

using layout_detail::copy_bytes;
using layout_detail::copy_rows;
using layout_detail::copy_rows_together;
using layout_detail::CopyMode;
using layout_detail::finish_streaming;
using layout_detail::RowsCopy;

namespace {

// How many runs ahead to prefetch: far enough to hide a miss to memory.
constexpr size_t kPrefetchAhead = 8;

void prefetch_run(const ConstByteRun& run) {
  // At most the first 256 bytes: longer runs stream well on their own.
  const size_t lines = std::min<size_t>((run.size + 63) / 64, 4);
  for (size_t line = 0; line < lines; ++line) __builtin_prefetch(run.data + line * 64);
}

// A lockstep walk reads about this many bytes of rows per block: they stay
// in the first-level cache while every job of the walk copies its part.
constexpr uint64_t kBlockBytes = uint64_t{16} << 10;

// Less than this a thread is not worth starting.
constexpr uint64_t kMinBytesPerThread = uint64_t{1} << 20;

// Strides up to this are walked in lockstep (a longer one is a block of its own).
constexpr uint64_t kMaxLockstepStride = kBlockBytes;

bool steps_alike(const RunGroup& a, const RunGroup& b) { return a.stride == b.stride && a.count == b.count; }

// Whether a job's runs fit inside its stride, stepping forwards: what the
// rows of a strided box are.
bool is_forward_strided(const RunGroup& g) {
  return g.count > 1 && g.stride >= g.size && g.stride <= kMaxLockstepStride && g.size > 0;
}

// Jobs walked together: row by row of the lead's progression, `block_rows`
// rows of every member before the next block. A job alone is a walk of one
// that copies all its rows in one block.
struct Walk {
  std::vector<size_t> members;
  uint64_t rows = 0;
  uint64_t block_rows = 1;
  uint64_t row_bytes = 0;  // of every member together
};

// The members' rows from `first` on, as copies that go row by row across
// them, or nothing when their rows differ in size.
std::vector<RowsCopy> rows_together(std::span<const GatherJob> jobs, const Walk& walk, uint64_t first) {
  std::vector<RowsCopy> copies;
  const uint64_t size = jobs[walk.members.front()].runs.size;
  for (const size_t m : walk.members) {
    const GatherJob& job = jobs[m];
    if (job.runs.size != size) return {};
    // Strides may step backwards (unsigned wrap-around, as RunGroup's).
    copies.push_back({reinterpret_cast<std::byte*>(reinterpret_cast<uintptr_t>(job.out) + first * job.out_step()),
                      static_cast<int64_t>(job.out_step()),
                      reinterpret_cast<const std::byte*>(job.runs.address + first * job.runs.stride),
                      static_cast<int64_t>(job.runs.stride)});
  }
  return copies;
}

// Rows [first, last) of every member of `walk`: members of one row size row
// by row across them (together they read each row in order), others a block
// of rows of each member at a time.
void copy_walk_rows(std::span<const GatherJob> jobs, const Walk& walk, uint64_t first, uint64_t last) {
  if (walk.members.size() > 1 && last > first) {
    const std::vector<RowsCopy> copies = rows_together(jobs, walk, first);
    if (!copies.empty()) {
      copy_rows_together(copies, static_cast<size_t>(jobs[walk.members.front()].runs.size), last - first,
                         CopyMode::kStreaming);
      return;
    }
  }
  for (uint64_t row = first; row < last; row += walk.block_rows) {
    const uint64_t rows = std::min(walk.block_rows, last - row);
    for (const size_t m : walk.members) {
      const GatherJob& job = jobs[m];
      const auto* src = reinterpret_cast<const std::byte*>(job.runs.address + row * job.runs.stride);
      // Strides may step backwards (unsigned wrap-around, as RunGroup's).
      auto* out = reinterpret_cast<std::byte*>(reinterpret_cast<uintptr_t>(job.out) + row * job.out_step());
      copy_rows(out, static_cast<int64_t>(job.out_step()), src,
                static_cast<int64_t>(job.runs.stride), static_cast<size_t>(job.runs.size), rows, CopyMode::kStreaming);
    }
  }
}

// Alike jobs together (each set in address order), every other job alone.
std::vector<Walk> plan_walks(std::span<const GatherJob> jobs) {
  std::vector<Walk> walks;
  std::vector<size_t> strided;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const RunGroup& g = jobs[i].runs;
    if (is_forward_strided(g)) {
      strided.push_back(i);
    } else if (g.size > 0 && g.count > 0) {
      walks.push_back(Walk{{i}, g.count, g.count, g.size});
    }
  }
  std::sort(strided.begin(), strided.end(), [&](size_t a, size_t b) {
    const RunGroup &x = jobs[a].runs, &y = jobs[b].runs;
    return std::tuple(x.stride, x.count, x.address) < std::tuple(y.stride, y.count, y.address);
  });
  for (size_t first = 0; first < strided.size();) {
    const RunGroup& lead = jobs[strided[first]].runs;
    Walk walk{{}, lead.count, std::max<uint64_t>(1, kBlockBytes / lead.stride), 0};
    for (size_t next = first; next < strided.size() && steps_alike(jobs[strided[next]].runs, lead) &&
                              jobs[strided[next]].runs.address - lead.address < lead.stride;
         ++next) {
      walk.members.push_back(strided[next]);
      walk.row_bytes += jobs[strided[next]].runs.size;
    }
    first += walk.members.size();
    walks.push_back(std::move(walk));
  }
  return walks;
}

// Bytes [begin, end) of the walks one after another (`starts` where each
// begins), to the nearest row of each walk so that neighbouring ranges meet.
void copy_walks_range(std::span<const GatherJob> jobs, std::span<const Walk> walks, std::span<const uint64_t> starts,
                      uint64_t begin, uint64_t end) {
  const auto nearest_row = [](const Walk& w, uint64_t byte) { return (byte + w.row_bytes / 2) / w.row_bytes; };
  for (size_t w = 0; w < walks.size(); ++w) {
    const uint64_t walk_end = starts[w] + walks[w].rows * walks[w].row_bytes;
    if (walk_end <= begin || starts[w] >= end) continue;
    const uint64_t from = std::max(begin, starts[w]) - starts[w], to = std::min(end, walk_end) - starts[w];
    copy_walk_rows(jobs, walks[w], nearest_row(walks[w], from), nearest_row(walks[w], to));
  }
  finish_streaming();
}

}  // namespace

void gather_streaming(std::span<const GatherJob> jobs, int threads) {
  const std::vector<Walk> walks = plan_walks(jobs);
  std::vector<uint64_t> starts;
  uint64_t total = 0;
  for (const Walk& walk : walks) {
    starts.push_back(total);
    total += walk.rows * walk.row_bytes;
  }
  const uint64_t parts =
      std::clamp<uint64_t>(total / kMinBytesPerThread, 1, static_cast<uint64_t>(std::max(1, threads)));
  const auto bound = [&](uint64_t part) { return total / parts * part + std::min(part, total % parts); };
  std::vector<std::jthread> helpers;
  for (uint64_t part = 1; part < parts; ++part) {
    helpers.emplace_back([&, part] { copy_walks_range(jobs, walks, starts, bound(part), bound(part + 1)); });
  }
  copy_walks_range(jobs, walks, starts, bound(0), bound(1));
  // The helpers join here; each made its streaming stores visible first.
}

void gather_streaming(std::span<const ConstByteRun> runs, std::byte* out) {
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i + kPrefetchAhead < runs.size()) prefetch_run(runs[i + kPrefetchAhead]);
    if (runs[i].size == 0) continue;  // an empty run may have no memory at all
    copy_bytes(out, runs[i].data, runs[i].size, CopyMode::kStreaming);
    out += runs[i].size;
  }
  // Streaming stores are weakly ordered: make them visible before the
  // header that tells the peer to read them.
  finish_streaming();
}

}  // namespace reshard::mpi_detail
