// Which peers of a TCP job this process can read from directly: on one host
// (kernel and network namespace), in a pid namespace both share, and with
// the kernel's leave to attach to the peer's memory (process_vm_readv). A
// message to such a peer crosses as one kernel copy, read by the receiver
// out of the sender's memory, instead of through the loopback.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "execute/tcp/rendezvous.h"

namespace reshard::tcp_detail {

// Over the job's connections, still blocking (right after join_job). Entry
// j: rank j's pid where both it and this process can read each other's
// memory, else 0 (and for this rank). `enabled` false (or
// RESHARD_SINGLE_COPY=0 in the environment) opts this process out, and so
// every pair it belongs to.
std::vector<pid_t> probe_same_host_peers(const JoinedJob& job, int rank, bool enabled,
                                         std::chrono::milliseconds timeout);

// Copies `into.size()` bytes at `address` in process `pid` into `into`.
// False if the kernel refuses or the peer's memory is gone.
bool read_peer_memory(pid_t pid, uint64_t address, std::span<std::byte> into) noexcept;

}  // namespace reshard::tcp_detail
