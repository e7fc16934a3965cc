// Copying one run of bytes, optionally around the cache.
#pragma once

#include <cstddef>

namespace reshard {

// How a copy's destination is written. kStreaming writes around the cache
// (non-temporal stores), which avoids reading each destination line before
// overwriting it: right for large copies whose result is not read back soon,
// as memcpy itself does for large sizes. Each thread that streamed must call
// finish_streaming() before others read what it wrote.
enum class CopyMode { kCached, kStreaming };

void copy_bytes(std::byte* dst, const std::byte* src, size_t size, CopyMode mode);

// Orders this thread's streaming stores before its later stores.
void finish_streaming();

}  // namespace reshard
