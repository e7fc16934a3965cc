// Streaming gather: many short runs copied into one contiguous buffer, bypassing the cache.
#pragma once

#include <cstddef>
#include <span>

#include "reshard/execute/transport.h"

namespace reshard::mpi_detail {

// Copies the runs one after another into `out` (which holds their total).
// The bytes are for another process to read, not for this one, so they are
// written with streaming (non-temporal) stores where the CPU has them: no
// cache line of `out` is read first or kept. With the next runs prefetched,
// gathering 256-byte runs 4 KiB apart measured about 1.5x memcpy's speed.
void gather_streaming(std::span<const ConstByteRun> runs, std::byte* out);

}  // namespace reshard::mpi_detail
