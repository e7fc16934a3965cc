// Same-host copies: one kernel copy between this process's memory and a peer's (cross-memory attach).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>

#include "run_groups.h"

namespace reshard::mpi_detail {

// Copies `bytes` from `remote` runs of process `pid` into `local` runs of
// this one, in order (process_vm_readv), the kernel copying each byte once.
// Both lists must hold exactly `bytes`. Throws Error(kTransport) with the
// system's reason (the peer gone, its memory unmapped, no permission) naming
// `peer_rank`; part of the bytes may have been written by then.
void read_from_peer(pid_t pid, int peer_rank, std::span<const RunGroup> remote, std::span<const RunGroup> local,
                    uint64_t bytes);

// Whether this process may read `bytes` at `address` in process `pid` and
// finds `expected` there: the check that a peer is on this host, in a pid
// namespace we share, and that the kernel lets us attach to its memory.
bool can_read_peer(pid_t pid, uint64_t address, std::span<const std::byte> expected) noexcept;

}  // namespace reshard::mpi_detail
