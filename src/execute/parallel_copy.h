// Runs many box copies at once, their bytes split evenly over threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "layout/box_copy.h"

namespace reshard::execute_detail {

// One box copy between two buffers (each pointing at its extent's first element).
struct CopyJob {
  layout_detail::BoxCopy copy;
  const std::byte* src = nullptr;
  std::byte* dst = nullptr;
};

// Copies every job. The total bytes are cut into `threads` equal ranges (fewer
// when there is less than `min_bytes_per_thread` each), so one large job is
// shared as readily as many small ones; the calling thread takes the first.
// Jobs with short rows that interleave in a shared buffer (the strips one
// shard sends to several others) go together, a block of rows at a time, so
// that buffer is walked in order. `mode` defaults to streaming stores for copies too large
// for any cache.
void run_copies(std::span<const CopyJob> jobs, int threads, uint64_t min_bytes_per_thread = uint64_t{1} << 20,
                std::optional<layout_detail::CopyMode> mode = std::nullopt);

}  // namespace reshard::execute_detail
