// The one interface under every file reshard reads or writes, in TensorStore's
// kvstore spirit: byte ranges of objects, whole small objects, listing and
// deleting under a prefix, and parallel uploads. Drivers: local files, the S3
// protocol, GCS, and an in-memory store (open_store.h picks one by scheme).
//
// Every method is thread safe. Errors are reshard::Error naming the place
// ("s3://bucket/key"), with the kinds of storage_error.h; no error text ever
// holds a credential, a token or a signature.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/storage/location.h"
#include "reshard/storage/parallel_upload.h"
#include "reshard/storage/part_layout.h"

namespace reshard::storage {

// What a store says of one object.
struct ObjectInfo {
  uint64_t size = 0;
  // Changes whenever the object is replaced (ETag, generation, mtime+inode).
  std::string version;
};

// One object found under a prefix.
struct ListEntry {
  std::string name;  // the key relative to the listed prefix ("a/b.safetensors")
  uint64_t size = 0;
};

// A byte range of an object and where its bytes go.
struct RangeRead {
  uint64_t offset = 0;
  std::span<std::byte> out;  // exactly this many bytes are read
};

class Store {
 public:
  virtual ~Store() = default;

  // "local", "s3", "gs" or "memory".
  virtual std::string_view name() const = 0;

  // The object at `object`, or nullopt when there is none (a folder or a
  // prefix with objects under it is not an object).
  virtual std::optional<ObjectInfo> stat(const Location& object) = 0;
  // Reads exactly out.size() bytes at `offset`. kObjectNotFound when there is
  // no object; Error(kIo) naming the object when it ends before the range does.
  virtual void read(const Location& object, uint64_t offset, std::span<std::byte> out) = 0;
  // Reads many ranges of one object: adjacent and nearby ranges are fetched
  // together, and stores over a network fetch up to their concurrency at
  // once. The default reads them one by one.
  virtual void read_ranges(const Location& object, std::span<const RangeRead> ranges);
  // The whole object, which must be at most `limit` bytes (Error(kInvalidArgument)
  // naming it and the limit otherwise: a wrong path must not load gigabytes).
  virtual std::string read_all(const Location& object, uint64_t limit) = 0;

  // Writes `bytes` as the whole object, which appears complete or not at all
  // (a local file: temporary sibling, fsync, rename). With IfExists::kFail an
  // object already there is Error(kAlreadyExists) and is left as it was.
  virtual void write_all(const Location& object, std::string_view bytes, IfExists if_exists) = 0;
  // Every object under `prefix` (its whole subtree), sorted by name. An absent
  // prefix lists nothing.
  virtual std::vector<ListEntry> list(const Location& prefix) = 0;
  // Removes the object; an absent one is no error.
  virtual void remove(const Location& object) = 0;

  // How this store cuts objects into parts (parts of any size for local files).
  virtual PartRules part_rules() const = 0;
  // Starts a parallel upload of an object of exactly `layout.object_bytes()`
  // bytes. With IfExists::kFail an object already there is refused now, before
  // anything is uploaded, and again when completing where the store can check.
  virtual std::unique_ptr<ParallelUpload> start_upload(const Location& object, const PartLayout& layout,
                                                       IfExists if_exists) = 0;
  // Joins the upload another process started, from its handle().
  virtual std::unique_ptr<ParallelUpload> join_upload(const Location& object, const PartLayout& layout,
                                                      std::string_view handle) = 0;
  // Removes uploads that were started for `object` and never completed (a
  // killed writer's parts): S3 multipart uploads, GCS components, local
  // temporary siblings. Returns how many were removed.
  virtual size_t abort_stale_uploads(const Location& object) = 0;
  // What unfinished uploads left at `where` (the object itself, or anything
  // under it as a folder), for a reader to point out: S3 multipart uploads
  // and GCS upload prefixes (whose writers the store cannot tell alive or
  // gone), local staging siblings of writers that are gone. Names as the
  // store spells them (keys, or paths). The next write of the object removes
  // its own (abort_stale_uploads). None by default.
  virtual std::vector<std::string> unfinished_uploads(const Location& /*where*/) { return {}; }
};

}  // namespace reshard::storage
