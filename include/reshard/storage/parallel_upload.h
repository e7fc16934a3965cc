// One object whose bytes several processes upload: the shape of Hadoop's
// MultipartUploader. One process starts the upload and passes its handle (a
// string) to the others; each writes the parts it holds and keeps their
// receipts; the starter gathers every receipt and completes the upload, which
// makes the object appear whole in one step, or aborts it, which leaves
// nothing behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reshard/storage/location.h"
#include "reshard/storage/part_layout.h"

namespace reshard::storage {

// Proof that a part was written: the part's number and the store's tag for it
// (an S3 ETag, a GCS component's generation; empty for local files).
struct PartReceipt {
  uint32_t index = 0;
  std::string tag;

  // "index:tag", and back (Error(kParse) on other text): receipts cross
  // processes as text.
  std::string serialize() const;
  static PartReceipt parse(std::string_view text);

  friend bool operator==(const PartReceipt&, const PartReceipt&) = default;
};

// Whether an upload may replace an object that is already there.
enum class IfExists {
  kReplace,  // the new object takes its place
  kFail,     // Error(kAlreadyExists) naming the object; nothing is changed
};

class ParallelUpload {
 public:
  virtual ~ParallelUpload() = default;

  // Where the object will appear.
  virtual const Location& destination() const = 0;
  // How its bytes are cut. The same on every process of the upload.
  virtual const PartLayout& parts() const = 0;
  // The text Store::join_upload takes in another process. It holds no secret.
  virtual std::string handle() const = 0;

  // Uploads part `index`: `bytes` must be exactly parts().size(index) bytes.
  // Thread safe; parts may be written in any order, by any process.
  virtual PartReceipt write_part(uint32_t index, std::span<const std::byte> bytes) = 0;
  // Whether write_at works: local files take bytes at any offset, so a
  // process may write the runs it holds without assembling whole parts.
  virtual bool writes_at_any_offset() const { return false; }
  // Writes `bytes` at `offset` of the object (writes_at_any_offset() only;
  // Error(kUnsupported) otherwise). Thread safe on disjoint ranges.
  virtual void write_at(uint64_t offset, std::span<const std::byte> bytes);
  // Makes this process's writes durable before its receipts are handed on
  // (a local file: fsync). Every process calls it once it has written.
  virtual void finish_writes() {}

  // Starter only: makes the object appear whole from every part's receipt,
  // in any order (Error(kInvalidArgument) when one is missing or repeated).
  // On failure the upload is aborted.
  virtual void complete(std::vector<PartReceipt> receipts) = 0;
  // Discards the upload and every part written so far; safe to call from any
  // process that has the handle, more than once, and after a failure. The
  // starter's object aborts on destruction unless complete() ran.
  virtual void abort() noexcept = 0;
};

}  // namespace reshard::storage
