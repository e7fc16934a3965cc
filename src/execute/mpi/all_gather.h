// All-gather of byte strings over point-to-point messages.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <span>
#include <vector>

#include "progress_engine.h"

namespace reshard::mpi_detail {

// Every rank sends its bytes to every other and receives theirs, sized by
// probing (no separate round for sizes). Built from point-to-point calls
// rather than MPI_Allgatherv so that a wait knows, and a timeout names, the
// ranks it has not heard from. Meant for metadata: P^2 small messages.
// `tag` must be fresh on `comm` for this call on every rank.
std::vector<std::vector<std::byte>> all_gather_bytes(ProgressEngine& engine, MPI_Comm comm, int tag,
                                                     int size, std::span<const std::byte> local);

}  // namespace reshard::mpi_detail
