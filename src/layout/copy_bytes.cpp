#include "layout/copy_bytes.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace reshard::layout_detail {
namespace {

// How many rows ahead copy_rows asks for, when it prefetches.
[[maybe_unused]] constexpr uint64_t kPrefetchRows = 8;
std::atomic<bool> prefetch_rows{false};

}  // namespace

void prefetch_rows_a_page_apart(bool on) { prefetch_rows.store(on, std::memory_order_relaxed); }

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

#if defined(__x86_64__) && defined(__GNUC__)
#define RESHARD_HAS_AVX2_STREAM 1

// 32-byte stores, four per step: a run of a strided copy (often 512 bytes) is
// a few steps, not dozens of 16-byte ones. On the machines measured, wider
// (AVX-512) stores were slower on long copies and no faster on short runs.
__attribute__((target("avx2"), always_inline)) inline __m256i load(const std::byte* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
__attribute__((target("avx2"), always_inline)) inline void store(std::byte* p, __m256i v) {
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v);
}

// The whole 32-byte words of `size` into a 32-byte aligned `dst`; returns
// how many bytes that was (all but size % 32).
__attribute__((target("avx2"), always_inline)) inline size_t stream_words_avx2(std::byte* dst, const std::byte* src,
                                                                             size_t size) {
  const size_t words = size - size % 32;
  size_t at = 0;
  for (; at + 128 <= words; at += 128) {
    const __m256i a = load(src + at), b = load(src + at + 32), c = load(src + at + 64), d = load(src + at + 96);
    store(dst + at, a);
    store(dst + at + 32, b);
    store(dst + at + 64, c);
    store(dst + at + 96, d);
  }
  for (; at < words; at += 32) store(dst + at, load(src + at));
  return words;
}

__attribute__((target("avx2"), always_inline)) inline void stream_run_avx2(std::byte* dst, const std::byte* src,
                                                                          size_t size) {
  const size_t head = std::min(size, (32 - reinterpret_cast<uintptr_t>(dst) % 32) % 32);
  if (head > 0) {
    std::memcpy(dst, src, head);
    dst += head;
    src += head;
    size -= head;
  }
  const size_t words = stream_words_avx2(dst, src, size);
  if (size > words) std::memcpy(dst + words, src + words, size - words);
}

// Rows of a multiple of 32 bytes into 32-byte aligned destinations: no head,
// no tail, no call per row.
__attribute__((target("avx2"))) void stream_rows_together_avx2(std::span<const RowsCopy> copies, size_t size,
                                                               uint64_t rows) {
  for (uint64_t row = 0; row < rows; ++row) {
    const auto r = static_cast<int64_t>(row);
    for (const RowsCopy& c : copies) stream_words_avx2(c.dst + r * c.dst_stride, c.src + r * c.src_stride, size);
  }
}

__attribute__((target("avx2"))) void stream_copy_avx2(std::byte* dst, const std::byte* src, size_t size) {
  stream_run_avx2(dst, src, size);
}

__attribute__((target("avx2"))) void stream_rows_avx2(std::byte* dst, int64_t dst_stride, const std::byte* src,
                                                      int64_t src_stride, size_t size, uint64_t rows) {
  for (uint64_t row = 0; row < rows; ++row, dst += dst_stride, src += src_stride) stream_run_avx2(dst, src, size);
}
#endif

void stream_rows(std::byte* dst, int64_t dst_stride, const std::byte* src, int64_t src_stride, size_t size,
                 uint64_t rows) {
  for (uint64_t row = 0; row < rows; ++row, dst += dst_stride, src += src_stride) stream_copy(dst, src, size);
}

using StreamCopy = void (*)(std::byte*, const std::byte*, size_t);
using StreamRows = void (*)(std::byte*, int64_t, const std::byte*, int64_t, size_t, uint64_t);

// The kernels for the CPU the process runs on.
struct StreamKernels {
  StreamCopy copy = stream_copy;
  StreamRows rows = stream_rows;
};

StreamKernels pick_stream_kernels() {
#if defined(RESHARD_HAS_AVX2_STREAM)
  __builtin_cpu_init();  // harmless when already initialised
  if (__builtin_cpu_supports("avx2")) return {stream_copy_avx2, stream_rows_avx2};
#endif
  return {};
}

const StreamKernels& stream_kernels() {
  static const StreamKernels chosen = pick_stream_kernels();
  return chosen;
}

}  // namespace

void copy_bytes(std::byte* dst, const std::byte* src, size_t size, CopyMode mode) {
  if (mode == CopyMode::kStreaming && size >= 64) {
    stream_kernels().copy(dst, src, size);
  } else {
    std::memcpy(dst, src, size);
  }
}

namespace {

void copy_rows_here(std::byte* dst, int64_t dst_stride, const std::byte* src, int64_t src_stride, size_t size,
                    uint64_t rows, CopyMode mode) {
  if (mode == CopyMode::kStreaming && size >= 64) {
    stream_kernels().rows(dst, dst_stride, src, src_stride, size, rows);
    return;
  }
  for (uint64_t row = 0; row < rows; ++row, dst += dst_stride, src += src_stride) std::memcpy(dst, src, size);
}

// Each row asks for the row kPrefetchRows ahead of it before it is copied.
// A prefetch never faults, so asking past the last row is harmless.
void copy_rows_prefetching(std::byte* dst, int64_t dst_stride, const std::byte* src, int64_t src_stride, size_t size,
                           uint64_t rows, CopyMode mode) {
  const int64_t ahead = static_cast<int64_t>(kPrefetchRows) * src_stride;
  for (uint64_t row = 0; row < rows; ++row, dst += dst_stride, src += src_stride) {
    const char* next = reinterpret_cast<const char*>(src) + ahead;
    for (size_t line = 0; line < size; line += 64) _mm_prefetch(next + line, _MM_HINT_T0);
    copy_rows_here(dst, dst_stride, src, src_stride, size, 1, mode);
  }
}

}  // namespace

void copy_rows(std::byte* dst, int64_t dst_stride, const std::byte* src, int64_t src_stride, size_t size,
               uint64_t rows, CopyMode mode) {
  const auto apart_at_least = [src_stride](int64_t bytes) { return src_stride >= bytes || src_stride <= -bytes; };
  const bool far_apart = (size <= 1024 && apart_at_least(4096)) || (size <= 256 && apart_at_least(1024));
  if (far_apart && rows > 1 && prefetch_rows.load(std::memory_order_relaxed)) {
    copy_rows_prefetching(dst, dst_stride, src, src_stride, size, rows, mode);
  } else {
    copy_rows_here(dst, dst_stride, src, src_stride, size, rows, mode);
  }
}

namespace {

// Whether every row of every copy starts 32-byte aligned in its destination
// and is whole 32-byte words: what the fused streaming kernel takes.
[[maybe_unused]] bool rows_fit_words(std::span<const RowsCopy> copies, size_t size) {
  if (size == 0 || size % 32 != 0) return false;
  for (const RowsCopy& c : copies) {
    if (reinterpret_cast<uintptr_t>(c.dst) % 32 != 0 || c.dst_stride % 32 != 0) return false;
  }
  return true;
}

}  // namespace

void copy_rows_together(std::span<const RowsCopy> copies, size_t size, uint64_t rows, CopyMode mode) {
#if defined(RESHARD_HAS_AVX2_STREAM)
  if (mode == CopyMode::kStreaming && stream_kernels().rows == stream_rows_avx2 && rows_fit_words(copies, size)) {
    stream_rows_together_avx2(copies, size, rows);
    return;
  }
#endif
  for (uint64_t row = 0; row < rows; ++row) {
    const auto r = static_cast<int64_t>(row);
    for (const RowsCopy& c : copies) copy_bytes(c.dst + r * c.dst_stride, c.src + r * c.src_stride, size, mode);
  }
}

void finish_streaming() { _mm_sfence(); }

#else

void copy_bytes(std::byte* dst, const std::byte* src, size_t size, CopyMode) { std::memcpy(dst, src, size); }
void copy_rows(std::byte* dst, int64_t dst_stride, const std::byte* src, int64_t src_stride, size_t size,
               uint64_t rows, CopyMode) {
  for (uint64_t row = 0; row < rows; ++row, dst += dst_stride, src += src_stride) std::memcpy(dst, src, size);
}
void copy_rows_together(std::span<const RowsCopy> copies, size_t size, uint64_t rows, CopyMode) {
  for (uint64_t row = 0; row < rows; ++row) {
    const auto r = static_cast<int64_t>(row);
    for (const RowsCopy& c : copies) std::memcpy(c.dst + r * c.dst_stride, c.src + r * c.src_stride, size);
  }
}
void finish_streaming() {}

#endif

}  // namespace reshard::layout_detail
