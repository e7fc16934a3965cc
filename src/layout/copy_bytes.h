// Copying one run of bytes, optionally around the cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace reshard::layout_detail {

// How a copy's destination is written. kStreaming writes around the cache
// (non-temporal stores), which avoids reading each destination line before
// overwriting it: right for large copies whose result is not read back soon,
// as memcpy itself does for large sizes. Each thread that streamed must call
// finish_streaming() before others read what it wrote.
enum class CopyMode { kCached, kStreaming };

void copy_bytes(std::byte* dst, const std::byte* src, size_t size, CopyMode mode);

// `rows` runs of `size` bytes, the i-th from src + i * src_stride to
// dst + i * dst_stride: a strided copy's rows in one call, so that short rows
// (a few hundred bytes) cost no call and no dispatch each.
void copy_rows(std::byte* dst, int64_t dst_stride, const std::byte* src, int64_t src_stride, size_t size,
               uint64_t rows, CopyMode mode);

// One of several strided copies that take parts of the same rows.
struct RowsCopy {
  std::byte* dst = nullptr;
  int64_t dst_stride = 0;
  const std::byte* src = nullptr;
  int64_t src_stride = 0;
};

// `rows` rows of `size` bytes of every copy, row by row across them: row 0
// of each, then row 1 of each, and so on. Copies that take neighbouring
// parts of the same rows (the strips one shard sends to every other device)
// then read each row once, in order, which the hardware prefetchers follow,
// and short rows cost no call each: a strided pass over a part of each row,
// one copy after another, misses on every row.
void copy_rows_together(std::span<const RowsCopy> copies, size_t size, uint64_t rows, CopyMode mode);

// From now on (true) copy_rows prefetches rows eight ahead where short rows
// lie a page or more apart in the source, or rows of 256 bytes or less a KiB
// or more apart: the hardware prefetchers stop at each page boundary, so on
// 4 KiB pages every such row misses (and walks the page tables) on its own,
// and they do not follow the second kind's strides either; asking ahead
// overlaps those misses (about twice as fast; 128-byte rows 2 KiB apart, a
// model's bf16 column strips, 1.9 -> 5.6 GB/s). On huge pages the prefetches only compete with the
// streaming stores for line buffers (some 10% slower), so it is off until a
// process's large buffers come in small pages (shared memory without huge
// pages: the execute layer's arena turns it on).
void prefetch_rows_a_page_apart(bool on);

// Orders this thread's streaming stores before its later stores.
void finish_streaming();

}  // namespace reshard::layout_detail
