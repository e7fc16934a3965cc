// SameHostPeers: which peers of a job this process can copy to and from directly.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "peer_arena.h"
#include "reshard/execute/mpi/mpi_transport.h"

namespace reshard::mpi_detail {

// Collective over `comm`. A pair of processes copies directly when both are
// on one host and each can attach to the other's memory (same kernel, a pid
// namespace they share, and ptrace permission: a container or Yama may deny
// it). Each process proves that by reading a random token in the other's
// memory; the answer is made symmetric so both sides of every message choose
// the same path. `enabled` false (or RESHARD_SINGLE_COPY=0 in the
// environment) opts this process out, and so every pair it belongs to;
// RESHARD_SINGLE_COPY=refuse makes its probes fail as a kernel that forbids
// the attach would. Entry j is the path to rank j, and why (kSelf for this
// rank); both processes of a pair get the same answer. Every rank also
// learns every rank's host (hosts numbered by their lowest rank) and its
// label for errors. A single-copy pair whose processes also map each
// other's shared arena (`shared_memory` in both, RESHARD_SHARED_MEMORY not 0
// or refuse) is kSharedMemory, and entry j of `arenas` holds rank j's
// mapping. Throws Error(kTransport) if MPI fails.
struct HostPeers {
  std::vector<PeerPath> paths;
  int processes_on_host = 1;  // ranks whose kernel is this one's, this one included
  std::vector<int> host_of;   // entry j: rank j's host, 0..H-1
  std::vector<std::string> host_names;  // entry j: rank j's host name and address, "myhost, 10.213.0.3"
  std::vector<std::shared_ptr<const PeerArena>> arenas;  // entry j: rank j's arena, mapped (kSharedMemory only)
};
HostPeers find_same_host_peers(MPI_Comm comm, bool enabled, bool shared_memory);

}  // namespace reshard::mpi_detail
