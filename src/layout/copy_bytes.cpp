#include "layout/copy_bytes.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace reshard {

#if defined(__SSE2__)

namespace {

void stream_copy(std::byte* dst, const std::byte* src, size_t size) {
  // Plain copy up to the first 16-byte aligned destination address.
  const size_t head = std::min(size, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  size -= head;
  auto* out = reinterpret_cast<__m128i*>(dst);
  const auto* in = reinterpret_cast<const __m128i*>(src);
  for (; size >= 64; size -= 64, in += 4, out += 4) {
    const __m128i a = _mm_loadu_si128(in), b = _mm_loadu_si128(in + 1);
    const __m128i c = _mm_loadu_si128(in + 2), d = _mm_loadu_si128(in + 3);
    _mm_stream_si128(out, a);
    _mm_stream_si128(out + 1, b);
    _mm_stream_si128(out + 2, c);
    _mm_stream_si128(out + 3, d);
  }
  for (; size >= 16; size -= 16, ++in, ++out) _mm_stream_si128(out, _mm_loadu_si128(in));
  std::memcpy(out, in, size);
}

}  // namespace

void copy_bytes(std::byte* dst, const std::byte* src, size_t size, CopyMode mode) {
  if (mode == CopyMode::kStreaming && size >= 64) {
    stream_copy(dst, src, size);
  } else {
    std::memcpy(dst, src, size);
  }
}

void finish_streaming() { _mm_sfence(); }

#else

void copy_bytes(std::byte* dst, const std::byte* src, size_t size, CopyMode) { std::memcpy(dst, src, size); }
void finish_streaming() {}

#endif

}  // namespace reshard
