#include "reshard/storage/part_writer.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::storage {

PartWriter::PartWriter(ParallelUpload& upload, std::vector<uint32_t> owned, uint32_t parts_in_flight)
    : upload_(upload),
      layout_(upload.parts()),
      owned_(layout_.count(), false),
      parts_in_flight_(std::max<uint32_t>(parts_in_flight, 1)) {
  for (const uint32_t part : owned) {
    if (part >= layout_.count()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: part {} of an upload of {} parts",
                                                           upload.destination().str(), part, layout_.count()));
    }
    owned_[part] = true;
  }
  // An owned empty part (an empty object's only part) is complete at once.
  for (uint32_t part = 0; part < layout_.count(); ++part) {
    if (owned_[part] && layout_.size(part) == 0) {
      std::unique_lock lock(mutex_);
      start_upload(part, {}, lock);
    }
  }
}

PartWriter::~PartWriter() { stop_uploading(); }

void PartWriter::stop_uploading() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
  }
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void PartWriter::rethrow_failure() const {
  if (failure_) std::rethrow_exception(failure_);
}

void PartWriter::start_upload(uint32_t part, std::vector<std::byte> bytes, std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return queued_.size() + running_ < parts_in_flight_ || failure_; });
  rethrow_failure();
  queued_.emplace_back(part, std::move(bytes));
  if (threads_.size() < parts_in_flight_) threads_.emplace_back([this] { upload_parts(); });
  changed_.notify_all();
}

void PartWriter::upload_parts() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return !queued_.empty() || stopping_; });
    if (queued_.empty()) return;  // stopping, nothing left
    auto [part, bytes] = std::move(queued_.back());
    queued_.pop_back();
    ++running_;
    const bool failed_already = failure_ != nullptr;  // then nothing more is uploaded
    lock.unlock();
    std::exception_ptr failure;
    PartReceipt receipt;
    if (!failed_already) {
      try {
        receipt = upload_.write_part(part, bytes);
      } catch (...) {
        failure = std::current_exception();
      }
    }
    lock.lock();
    --running_;
    if (failure && !failure_) failure_ = failure;
    if (!failure && !failure_) {
      receipts_.push_back(std::move(receipt));
      uploaded_ += bytes.size();
    }
    changed_.notify_all();
  }
}

void PartWriter::write_at(uint64_t offset, std::span<const std::byte> bytes) {
  const uint64_t object = layout_.object_bytes();
  if (offset > object || bytes.size() > object - offset) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} bytes at {} pass the end of {} bytes",
                                                         upload_.destination().str(), bytes.size(), offset, object));
  }
  std::unique_lock lock(mutex_);
  rethrow_failure();
  while (!bytes.empty()) {
    const uint32_t part = layout_.part_of(offset);
    const uint64_t part_start = layout_.offset(part);
    const uint64_t part_size = layout_.size(part);
    const uint64_t take = std::min<uint64_t>(bytes.size(), part_start + part_size - offset);
    if (owned_[part]) {
      Filling& filling = filling_[part];
      if (filling.bytes.empty()) filling.bytes.resize(part_size);
      std::memcpy(filling.bytes.data() + (offset - part_start), bytes.data(), take);
      filling.arrived += take;
      if (filling.arrived > part_size) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: part {} got more bytes than it holds: some were written twice",
                                upload_.destination().str(), part));
      }
      if (filling.arrived == part_size) {
        std::vector<std::byte> full = std::move(filling.bytes);
        filling_.erase(part);
        start_upload(part, std::move(full), lock);
      }
    }
    offset += take;
    bytes = bytes.subspan(static_cast<size_t>(take));
  }
}

std::vector<PartReceipt> PartWriter::finish() {
  stop_uploading();  // the threads drain the queue before they end
  const std::lock_guard lock(mutex_);
  rethrow_failure();
  for (uint32_t part = 0; part < layout_.count(); ++part) {
    if (!owned_[part]) continue;
    const bool sent = std::any_of(receipts_.begin(), receipts_.end(), [&](const auto& r) { return r.index == part; });
    if (!sent) {
      const auto filling = filling_.find(part);
      const uint64_t arrived = filling == filling_.end() ? 0 : filling->second.arrived;
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: part {} (bytes {} to {}) got {} of its {} bytes", upload_.destination().str(), part,
                              layout_.offset(part), layout_.offset(part) + layout_.size(part), arrived,
                              layout_.size(part)));
    }
  }
  std::vector<PartReceipt> receipts = receipts_;
  std::sort(receipts.begin(), receipts.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  return receipts;
}

uint64_t PartWriter::uploaded_bytes() const {
  const std::lock_guard lock(mutex_);
  return uploaded_;
}

}  // namespace reshard::storage
