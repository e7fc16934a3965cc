// Memory reshard keeps after a call returns: freed buffers held for the next
// call's buffers of the same sizes (a training step's arrays come back with
// the same shapes), so their pages need not be faulted in and zeroed again.
#pragma once

#include <cstdint>

namespace reshard {

struct CachedMemory {
  uint64_t shared_arena_bytes = 0;  // freed shared-memory buffers kept populated
  uint64_t staging_bytes = 0;       // freed staging buffers (for packed messages) kept
  uint64_t limit_bytes = 0;         // the bound on each of the two
};

// What the process's caches hold now.
CachedMemory cached_memory();

// The bound on each cache: 256 MiB unless RESHARD_CACHED_MEMORY (a size:
// "1GiB", "0") or set_cached_memory_limit says otherwise; the shared arena
// keeps at most an eighth of the host's memory whatever the bound.
uint64_t cached_memory_limit();
// Sets it; a lower bound gives the excess back to the kernel at once, and 0
// keeps nothing (every buffer's pages are faulted in afresh).
void set_cached_memory_limit(uint64_t bytes);

// Gives every kept page back to the kernel now; the bound stays, so later
// calls fill the caches again.
void release_cached_memory();

}  // namespace reshard
