// PeerArena: a same-host peer's shared memory arena, mapped into this process.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "run_groups.h"

namespace reshard::mpi_detail {

// A peer's arena (execute_detail::SharedArena), mapped once for the transport's life:
// its shards are then read, and its receiving runs written, with ordinary
// loads and stores. The arena never shrinks and freed ranges read as zeros,
// so the mapping never faults whatever the peer does; the message protocol
// keeps a sender's runs alive until its receiver has read them, as for the
// kernel copy, and a receiver's until its sender has written them.
class PeerArena {
 public:
  // Maps the arena that process `pid` holds as descriptor `fd`, `bytes` long
  // and mapped at `remote_base` there, and checks that it starts with
  // `token`. Null where that fails: no pidfd_getfd, the kernel's permission
  // to attach refused, another file, or a peer that is gone.
  static std::unique_ptr<PeerArena> map(pid_t pid, int fd, uint64_t remote_base, uint64_t bytes,
                                        std::span<const std::byte> token) noexcept;
  ~PeerArena();
  PeerArena(const PeerArena&) = delete;
  PeerArena& operator=(const PeerArena&) = delete;

  // The peer's runs as addresses in this process, or empty when some run
  // lies outside its arena (memory of its own: the kernel copy reads that).
  std::optional<std::vector<RunGroup>> to_local(std::span<const RunGroup> remote) const;

 private:
  PeerArena(std::byte* local, uint64_t remote_base, uint64_t bytes)
      : local_(local), remote_base_(remote_base), bytes_(bytes) {}
  std::byte* local_;
  uint64_t remote_base_;
  uint64_t bytes_;
};

}  // namespace reshard::mpi_detail
