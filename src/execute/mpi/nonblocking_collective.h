// Barrier and agreement on MPI's own non-blocking collectives, polled so that liveness rules hold.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "progress_engine.h"

namespace reshard::mpi_detail {

// MPI_Ibarrier on `comm`, waited on through `engine` (which keeps every other
// request moving, reads failure notices and heartbeats, and throws
// Error(kTimeout) only once a peer has been silent for the timeout: slow
// peers are waited for). Every rank calls the collectives of one communicator
// in the same order.
void barrier(ProgressEngine& engine, MPI_Comm comm);

// Whether every rank passed the same `value`: one MPI_Iallreduce (MAX of the
// value and of its complement, so both the largest and smallest come back)
// instead of a message between every two ranks.
bool all_equal(ProgressEngine& engine, MPI_Comm comm, uint64_t value);

}  // namespace reshard::mpi_detail
