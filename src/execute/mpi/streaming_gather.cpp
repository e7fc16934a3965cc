#include "streaming_gather.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "layout/copy_bytes.h"

namespace reshard::mpi_detail {
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

// Strides up to this are walked in lockstep (a longer one is a block of its own).
constexpr uint64_t kMaxLockstepStride = kBlockBytes;

bool steps_alike(const RunGroup& a, const RunGroup& b) { return a.stride == b.stride && a.count == b.count; }

// Whether a job's runs fit inside its stride, stepping forwards: what the
// rows of a strided box are.
bool is_forward_strided(const RunGroup& g) {
  return g.count > 1 && g.stride >= g.size && g.stride <= kMaxLockstepStride && g.size > 0;
}

// The jobs `members` names, all stepping alike through the same rows.
void gather_in_lockstep(std::span<const GatherJob> jobs, std::span<const size_t> members) {
  const RunGroup& lead = jobs[members.front()].runs;
  const uint64_t block_rows = std::max<uint64_t>(1, kBlockBytes / lead.stride);
  const auto stride = static_cast<int64_t>(lead.stride);
  for (uint64_t row = 0; row < lead.count; row += block_rows) {
    const uint64_t rows = std::min(block_rows, lead.count - row);
    for (const size_t m : members) {
      const GatherJob& job = jobs[m];
      const auto* src = reinterpret_cast<const std::byte*>(job.runs.address + row * job.runs.stride);
      copy_rows(job.out + row * job.runs.size, static_cast<int64_t>(job.runs.size), src, stride,
                static_cast<size_t>(job.runs.size), rows, CopyMode::kStreaming);
    }
  }
}

void gather_alone(const GatherJob& job) {
  const RunGroup& g = job.runs;
  if (g.size == 0 || g.count == 0) return;
  copy_rows(job.out, static_cast<int64_t>(g.size), reinterpret_cast<const std::byte*>(g.address),
            static_cast<int64_t>(g.stride), static_cast<size_t>(g.size), g.count, CopyMode::kStreaming);
}

}  // namespace

void gather_streaming(std::span<const GatherJob> jobs) {
  std::vector<size_t> strided;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (is_forward_strided(jobs[i].runs)) {
      strided.push_back(i);
    } else {
      gather_alone(jobs[i]);
    }
  }
  // Alike jobs side by side, each set in address order.
  std::sort(strided.begin(), strided.end(), [&](size_t a, size_t b) {
    const RunGroup &x = jobs[a].runs, &y = jobs[b].runs;
    return std::tuple(x.stride, x.count, x.address) < std::tuple(y.stride, y.count, y.address);
  });
  for (size_t first = 0; first < strided.size();) {
    const RunGroup& lead = jobs[strided[first]].runs;
    size_t last = first + 1;
    while (last < strided.size() && steps_alike(jobs[strided[last]].runs, lead) &&
           jobs[strided[last]].runs.address - lead.address < lead.stride) {
      ++last;
    }
    gather_in_lockstep(jobs, std::span(strided).subspan(first, last - first));
    first = last;
  }
  finish_streaming();
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
