// SameHostPeers: which peers of a job this process can copy to and from directly.
#pragma once

#include <mpi.h>

#include <vector>

namespace reshard::mpi_detail {

// Collective over `comm`. A pair of processes copies directly when both are
// on one host and each can attach to the other's memory (same kernel, a pid
// namespace they share, and ptrace permission: a container or Yama may deny
// it). Each process proves that by reading a random token in the other's
// memory; the answer is made symmetric so both sides of every message choose
// the same path. `enabled` false (or RESHARD_SINGLE_COPY=0 in the
// environment) opts this process out, and so every pair it belongs to.
// Entry j says whether rank j is such a peer (never this rank itself).
// Throws Error(kTransport) if MPI fails.
std::vector<bool> find_same_host_peers(MPI_Comm comm, bool enabled);

}  // namespace reshard::mpi_detail
