#include "streaming_gather.h"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace reshard::mpi_detail {
namespace {

// How many runs ahead to prefetch: far enough to hide a miss to memory.
constexpr size_t kPrefetchAhead = 8;

void prefetch_run(const ConstByteRun& run) {
  // At most the first 256 bytes: longer runs stream well on their own.
  const size_t lines = std::min<size_t>((run.size + 63) / 64, 4);
  for (size_t line = 0; line < lines; ++line) __builtin_prefetch(run.data + line * 64);
}

#if defined(__SSE2__)
// Copies `size` bytes to `out` with streaming stores for its 16-byte-aligned middle.
void copy_streaming(const std::byte* in, size_t size, std::byte* out) {
  const size_t misalign = reinterpret_cast<uintptr_t>(out) % 16;
  size_t head = misalign == 0 ? 0 : std::min(size, 16 - misalign);
  std::memcpy(out, in, head);
  size_t done = head;
  for (; done + 16 <= size; done += 16) {
    __m128i v;
    std::memcpy(&v, in + done, 16);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + done), v);
  }
  std::memcpy(out + done, in + done, size - done);
}
#else
void copy_streaming(const std::byte* in, size_t size, std::byte* out) { std::memcpy(out, in, size); }
#endif

}  // namespace

void gather_streaming(std::span<const ConstByteRun> runs, std::byte* out) {
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i + kPrefetchAhead < runs.size()) prefetch_run(runs[i + kPrefetchAhead]);
    if (runs[i].size == 0) continue;
    copy_streaming(runs[i].data, runs[i].size, out);
    out += runs[i].size;
  }
#if defined(__SSE2__)
  // Streaming stores are weakly ordered: make them visible before the
  // header that tells the peer to read them.
  _mm_sfence();
#endif
}

}  // namespace reshard::mpi_detail
