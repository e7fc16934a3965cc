// Streaming gather: many short runs copied into one contiguous buffer, bypassing the cache.
#pragma once

#include <cstddef>
#include <span>

#include "reshard/execute/transport.h"
#include "run_groups.h"

namespace reshard::mpi_detail {

// Copies the runs one after another into `out` (which holds their total).
// The bytes are for another process to read, not for this one, so they are
// written with streaming (non-temporal) stores where the CPU has them: no
// cache line of `out` is read first or kept. With the next runs prefetched,
// gathering 256-byte runs 4 KiB apart measured about 1.5x memcpy's speed.
void gather_streaming(std::span<const ConstByteRun> runs, std::byte* out);

// One progression of runs to gather, and where its bytes go: run i to
// out + i * out_stride, or back to back from `out` when out_stride is 0.
struct GatherJob {
  RunGroup runs;
  std::byte* out = nullptr;
  uint64_t out_stride = 0;

  uint64_t out_step() const { return out_stride != 0 ? out_stride : runs.size; }
};

// Copies every job (into its rows, or gathered back to back), as the runs
// version does. Jobs whose runs step alike
// through the same rows of memory (equal stride and count, each run inside
// the stride, starting within one stride of each other: the strips a shard
// sends to several peers) are walked together, a block of rows at a time, so
// each row is read from memory once and from cache by the rest; a strided
// pass per job would read every page once per job. The bytes are split over
// up to `threads` threads (at least 1 MiB each), by rows.
void gather_streaming(std::span<const GatherJob> jobs, int threads = 1);

}  // namespace reshard::mpi_detail
