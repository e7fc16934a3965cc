#include "pipelines/common/block_pipeline.h"

#include <algorithm>
#include <exception>
#include <future>
#include <utility>
#include <vector>

namespace reshard::pipelines_detail {
namespace {

// Waits for `stage` if it runs and rethrows its error; a default future is idle.
void finish(std::future<void>& stage) {
  if (stage.valid()) stage.get();
}

// Waits for every stage still running, keeping only the first error: buffers
// are freed only once no thread can touch them.
void finish_all(std::future<void>& a, std::future<void>& b, std::exception_ptr& first) {
  for (std::future<void>* stage : {&a, &b}) {
    try {
      finish(*stage);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
}

}  // namespace

std::span<std::byte> BlockBuffer::resize(size_t size) {
  if (size > capacity_) {
    data_.reset(new std::byte[size]);  // default-initialised: not zeroed
    capacity_ = size;
  }
  size_ = size;
  return bytes();
}

void run_block_pipeline(size_t blocks, const BlockStages& stages, BlockBuffers& buffers) {
  if (blocks == 0) return;
  BlockBuffer* in = buffers.in;
  BlockBuffer* out = buffers.out;
  std::future<void> reading, writing;
  std::exception_ptr failure;
  try {
    stages.read(0, in[0]);
    for (size_t i = 0; i < blocks; ++i) {
      // in[(i+1)%2] held block i-1's input, whose transform has ended.
      if (i + 1 < blocks) {
        reading = std::async(std::launch::async, [&, next = i + 1] { stages.read(next, in[next % 2]); });
      }
      // out[i%2] held block i-2's output, whose write ended before block i-1's began.
      stages.transform(i, in[i % 2].bytes(), out[i % 2]);
      finish(writing);
      if (stages.write) {
        writing = std::async(std::launch::async, [&, i] { stages.write(i, out[i % 2].bytes()); });
      }
      finish(reading);
    }
    finish(writing);
  } catch (...) {
    failure = std::current_exception();
  }
  finish_all(reading, writing, failure);
  if (failure) std::rethrow_exception(failure);
}

void for_row_ranges(int64_t rows, int threads, int64_t min_rows,
                    const std::function<void(int64_t begin, int64_t end)>& body) {
  if (rows <= 0) return;
  const int64_t by_size = std::max<int64_t>(1, rows / std::max<int64_t>(1, min_rows));
  const int64_t parts = std::min<int64_t>(std::max(1, threads), by_size);
  const auto bound = [&](int64_t part) { return rows / parts * part + std::min(part, rows % parts); };
  std::vector<std::future<void>> helpers;
  std::exception_ptr failure;
  for (int64_t part = 1; part < parts; ++part) {
    helpers.push_back(std::async(std::launch::async, [&, part] { body(bound(part), bound(part + 1)); }));
  }
  try {
    body(bound(0), bound(1));
  } catch (...) {
    failure = std::current_exception();
  }
  for (std::future<void>& helper : helpers) {
    try {
      helper.get();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace reshard::pipelines_detail
