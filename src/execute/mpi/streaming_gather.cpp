#include "streaming_gather.h"

#include <algorithm>

#include "layout/copy_bytes.h"

namespace reshard::mpi_detail {
namespace {

// How many runs ahead to prefetch: far enough to hide a miss to memory.
constexpr size_t kPrefetchAhead = 8;

void prefetch_run(const ConstByteRun& run) {
  // At most the first 256 bytes: longer runs stream well on their own.
  const size_t lines = std::min<size_t>((run.size + 63) / 64, 4);
  for (size_t line = 0; line < lines; ++line) __builtin_prefetch(run.data + line * 64);
}

}  // namespace

void gather_streaming(std::span<const ConstByteRun> runs, std::byte* out) {
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i + kPrefetchAhead < runs.size()) prefetch_run(runs[i + kPrefetchAhead]);
    if (runs[i].size == 0) continue;  // an empty run may have no memory at all
    copy_bytes(out, runs[i].data, runs[i].size, CopyMode::kStreaming);
    out += runs[i].size;
  }
  // Streaming stores are weakly ordered: make them visible before the
  // header that tells the peer to read them.
  finish_streaming();
}

}  // namespace reshard::mpi_detail
