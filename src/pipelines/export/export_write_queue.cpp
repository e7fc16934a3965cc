#include "pipelines/export/export_write_queue.h"

#include <chrono>

namespace reshard::pipelines_detail {

BlockWriteQueue::BlockWriteQueue(size_t depth, Write write)
    : depth_(depth < 1 ? 1 : depth), write_(std::move(write)), thread_([this] { loop(); }) {}

BlockWriteQueue::~BlockWriteQueue() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<std::byte> BlockWriteQueue::take(size_t bytes) {
  std::vector<std::byte> buffer;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !free_.empty() || buffers_ < depth_; });
    if (!free_.empty()) {
      buffer = std::move(free_.back());
      free_.pop_back();
    } else {
      ++buffers_;
    }
  }
  buffer.resize(bytes);  // a reused buffer of the same size is not touched again
  return buffer;
}

void BlockWriteQueue::push(size_t index, std::vector<std::byte> bytes) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back({index, std::move(bytes)});
  }
  changed_.notify_all();
}

void BlockWriteQueue::give_back(std::vector<std::byte> bytes) {
  {
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(bytes));
  }
  changed_.notify_all();
}

void BlockWriteQueue::finish() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
}

void BlockWriteQueue::loop() {
  while (true) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return !jobs_.empty() || closing_; });
      if (jobs_.empty()) return;  // closing, and everything queued is written
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (!error_) {  // only this thread sets it
      const auto start = std::chrono::steady_clock::now();
      try {
        write_(job.index, job.bytes);
      } catch (...) {
        error_ = std::current_exception();
      }
      write_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    give_back(std::move(job.bytes));
  }
}

}  // namespace reshard::pipelines_detail
