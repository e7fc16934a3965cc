// Fills the parts of a parallel upload that this process owns, from bytes
// arriving at any offsets in any order, and uploads each part as soon as all
// of its bytes are there, while later bytes are still being produced. Memory
// is the parts being filled plus the parts in flight, never the object.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "reshard/storage/parallel_upload.h"

namespace reshard::storage {

class PartWriter {
 public:
  // Writes the parts of `upload` listed in `owned` (another process writes the
  // rest), with up to `parts_in_flight` uploads at once. `upload` must outlive
  // this writer.
  PartWriter(ParallelUpload& upload, std::vector<uint32_t> owned, uint32_t parts_in_flight = 4);
  PartWriter(const PartWriter&) = delete;
  PartWriter& operator=(const PartWriter&) = delete;
  // Waits for the uploads in flight (their results are dropped unless finish() ran).
  ~PartWriter();

  // Keeps the bytes of [offset, offset + bytes.size()) that fall in owned
  // parts and drops the rest. A part whose every byte has arrived is uploaded
  // (this call waits while parts_in_flight uploads are running). Thread safe.
  // Error(kInvalidArgument) for bytes past the object's end or a byte written
  // twice; the first failed upload's error is rethrown here or by finish().
  void write_at(uint64_t offset, std::span<const std::byte> bytes);

  // Waits for every upload and returns the owned parts' receipts.
  // Error(kInvalidArgument) naming the first owned part some bytes of which
  // never arrived.
  std::vector<PartReceipt> finish();

  // Bytes uploaded by this writer so far.
  uint64_t uploaded_bytes() const;

 private:
  struct Filling {
    std::vector<std::byte> bytes;
    uint64_t arrived = 0;
  };

  // Hands a full part to the uploading threads, waiting for a free slot.
  void start_upload(uint32_t part, std::vector<std::byte> bytes, std::unique_lock<std::mutex>& lock);
  void upload_parts();  // an uploading thread's loop
  void stop_uploading();
  void rethrow_failure() const;

  ParallelUpload& upload_;
  const PartLayout layout_;
  std::vector<bool> owned_;
  uint32_t parts_in_flight_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<uint32_t, Filling> filling_;
  std::vector<std::pair<uint32_t, std::vector<std::byte>>> queued_;  // full parts waiting for a thread
  std::vector<PartReceipt> receipts_;
  std::vector<std::thread> threads_;  // parts_in_flight of them
  uint32_t running_ = 0;  // parts being uploaded
  bool stopping_ = false;
  uint64_t uploaded_ = 0;
  std::exception_ptr failure_;
};

}  // namespace reshard::storage
