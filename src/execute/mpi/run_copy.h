// Copying between two run lists of this process's memory, run boundaries on each side its own.
#pragma once

#include <cstdint>
#include <span>

#include <vector>

#include "run_groups.h"
#include "streaming_gather.h"

namespace reshard::mpi_detail {

// Copies `bytes` from the runs `from` into the runs `to`, in order; both must
// hold exactly `bytes`. Where one side's runs are rows of equal size and the
// other side is contiguous (or rows of the same size), a whole stretch of
// rows goes in one strided call, so short runs cost no call each. Large
// copies write around the cache.
void copy_between_runs(std::span<const RunGroup> to, std::span<const RunGroup> from, uint64_t bytes);

// The same copy as the strided copies it makes, in order, without copying:
// each job's rows go from its runs to out (+ i * out_stride). Copies from
// several messages that read the same rows can then be walked together
// (gather_streaming), each row read from memory once.
std::vector<GatherJob> row_copies_between_runs(std::span<const RunGroup> to, std::span<const RunGroup> from,
                                               uint64_t bytes);

}  // namespace reshard::mpi_detail
