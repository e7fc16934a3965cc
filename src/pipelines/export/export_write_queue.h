// Writes an export's produced blocks on a thread of its own, so that the
// next block is read and produced while the last one is written. At most
// `depth` block buffers exist at once (one being produced, the others being
// written or waiting), which is what bounds an export's memory.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace reshard::pipelines_detail {

class BlockWriteQueue {
 public:
  using Write = std::function<void(size_t index, std::span<const std::byte> bytes)>;

  // `write` runs on the queue's thread, one block at a time, in push order.
  BlockWriteQueue(size_t depth, Write write);
  ~BlockWriteQueue();
  BlockWriteQueue(const BlockWriteQueue&) = delete;
  BlockWriteQueue& operator=(const BlockWriteQueue&) = delete;

  // A buffer of `bytes` bytes to produce a block into: a free one, or a new
  // one while fewer than `depth` exist; otherwise waits for a write to end.
  std::vector<std::byte> take(size_t bytes);
  // Queues block `index`, produced into `bytes` (from take()), for writing.
  void push(size_t index, std::vector<std::byte> bytes);
  // Returns a buffer from take() that holds nothing to write.
  void give_back(std::vector<std::byte> bytes);
  // Waits for every queued write and ends the thread; rethrows the first
  // write's failure (the writes after it are skipped).
  void finish();
  // Seconds the thread spent in `write`, once finished.
  double write_seconds() const { return write_seconds_; }

 private:
  struct Job {
    size_t index = 0;
    std::vector<std::byte> bytes;
  };
  void loop();

  const size_t depth_;
  const Write write_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::vector<std::byte>> free_;
  size_t buffers_ = 0;  // buffers made so far
  std::deque<Job> jobs_;
  bool closing_ = false;
  std::exception_ptr error_;
  double write_seconds_ = 0;
  std::thread thread_;
};

}  // namespace reshard::pipelines_detail
