#include "reshard/execute/cached_memory.h"

#include <atomic>
#include <cstdlib>

#include "reshard/layout/error.h"
#include "reshard/layout/parse.h"
#include "shared_arena.h"
#include "staging_cache.h"

namespace reshard {

using execute_detail::SharedArena;
using execute_detail::StagingCache;

namespace {

constexpr uint64_t kDefaultLimit = uint64_t{256} << 20;

uint64_t limit_from_environment() {
  const char* text = std::getenv("RESHARD_CACHED_MEMORY");
  if (text == nullptr || *text == '\0') return kDefaultLimit;
  try {
    return parse_byte_size(text);
  } catch (const Error& e) {
    throw Error(ErrorCode::kParse, std::string("RESHARD_CACHED_MEMORY: ") + e.what());
  }
}

std::atomic<uint64_t>& limit() {
  static std::atomic<uint64_t> bytes{limit_from_environment()};
  return bytes;
}

}  // namespace

CachedMemory cached_memory() {
  CachedMemory held;
  if (SharedArena* arena = SharedArena::for_process()) held.shared_arena_bytes = arena->kept_bytes();
  held.staging_bytes = StagingCache::for_process().kept_bytes();
  held.limit_bytes = cached_memory_limit();
  return held;
}

uint64_t cached_memory_limit() { return limit().load(std::memory_order_relaxed); }

void set_cached_memory_limit(uint64_t bytes) {
  limit().store(bytes, std::memory_order_relaxed);
  if (SharedArena* arena = SharedArena::for_process()) {
    const uint64_t eighth = arena->reserved_bytes() / 8;
    arena->set_max_kept_bytes(bytes < eighth ? bytes : eighth);
  }
  StagingCache::for_process().set_max_kept_bytes(static_cast<size_t>(bytes));
}

void release_cached_memory() {
  if (SharedArena* arena = SharedArena::for_process()) {
    const uint64_t bound = arena->max_kept_bytes();
    arena->set_max_kept_bytes(0);
    arena->set_max_kept_bytes(bound);
  }
  StagingCache& staging = StagingCache::for_process();
  const size_t bound = staging.max_kept_bytes();
  staging.set_max_kept_bytes(0);
  staging.set_max_kept_bytes(bound);
}

}  // namespace reshard
