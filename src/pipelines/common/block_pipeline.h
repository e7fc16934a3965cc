// Streaming a tensor through read, transform and write with the three
// overlapping: while block i is transformed, block i+1 is read and block i-1
// written, each on a thread of its own. A merge that reads, merges and writes
// one after the other leaves the disk idle while it computes and the cores
// idle while it waits on the disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

namespace reshard::pipelines_detail {

// A block's bytes, reused from block to block and tensor to tensor: resizing
// within the capacity it has grown to neither allocates nor writes (a fresh
// allocation per block costs a page fault and a zeroing per page, as much as
// the copy it holds).
class BlockBuffer {
 public:
  // The first `size` bytes, uninitialised where they were never written.
  std::span<std::byte> resize(size_t size);
  std::span<std::byte> bytes() { return {data_.get(), size_}; }
  std::span<const std::byte> bytes() const { return {data_.get(), size_}; }

 private:
  std::unique_ptr<std::byte[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// The two input and two output blocks a pipeline cycles through.
struct BlockBuffers {
  BlockBuffer in[2];
  BlockBuffer out[2];
};

struct BlockStages {
  // Fills `in` with block `index`'s input, resizing it to fit.
  std::function<void(size_t index, BlockBuffer& in)> read;
  // Turns block `index`'s input into its output (resizing `out` to fit).
  std::function<void(size_t index, std::span<const std::byte> in, BlockBuffer& out)> transform;
  // Consumes block `index`'s output; blocks arrive in order, one at a time.
  // Empty: nothing is written (a pass that only computes, like DoRA's norms).
  std::function<void(size_t index, std::span<const std::byte> out)> write;
};

// Runs `blocks` blocks through the stages: read(i + 1) and write(i - 1)
// overlap transform(i), in `buffers` (two input and two output blocks). The
// first stage to throw stops the pipeline; its error is rethrown here once
// every stage in flight has ended (no stage outlives the call).
void run_block_pipeline(size_t blocks, const BlockStages& stages, BlockBuffers& buffers);

// Splits rows [0, rows) into at most `threads` contiguous ranges of at least
// `min_rows` rows each (but always one range for a non-empty input), and runs
// `body(begin, end)` for each, on the caller's thread and `threads - 1` more.
// The first error is rethrown once all have ended.
void for_row_ranges(int64_t rows, int threads, int64_t min_rows,
                    const std::function<void(int64_t begin, int64_t end)>& body);

}  // namespace reshard::pipelines_detail
