// Naming the paths a process's messages take: for logs, benchmarks and tests.
#pragma once

#include <span>
#include <string>

#include "reshard/execute/mpi/mpi_transport.h"

namespace reshard::mpi_detail {

// "rank R of N: single copy with ranks 1-3, 5; MPI (other host) with rank 4":
// each path taken, in PeerPath's order, with the peers it serves as ranges.
// `paths[j]` is the path to rank j; "rank 0 of 1: alone" in a job of one.
std::string describe_peer_paths(int rank, std::span<const PeerPath> paths);

// Writes describe_peer_paths's line to stderr, as one write, when the
// environment says RESHARD_LOG=debug.
void log_peer_paths(int rank, std::span<const PeerPath> paths);

}  // namespace reshard::mpi_detail
