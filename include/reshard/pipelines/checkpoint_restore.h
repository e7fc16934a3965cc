// Restoring a reshard checkpoint onto any layout and number of processes,
// from a local folder or an object store's folder (s3://, gs://, memory://).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reshard/execute/transport.h"
#include "reshard/layout/sharding.h"
#include "reshard/layout/topology.h"
#include "reshard/pipelines/named_array.h"
#include "reshard/storage/location.h"

namespace reshard {

// Where one saved tensor goes: the layout to restore it in.
struct RestoreTarget {
  std::string name;
  NamedSharding sharding;
  Topology topology;
};

struct RestoreOptions {
  // Verify checksums. In a version 2 checkpoint each block of a chunk has
  // its own, so only the blocks that hold needed bytes are read (the bytes
  // needed rounded out to blocks); a version 1 chunk that a slice meets is
  // read whole. Off, only the bytes the slices need are read (and damage
  // goes unseen).
  bool verify_checksums = true;
};

// What one process restored and read from the files.
struct RestoreResult {
  std::vector<NamedArray> arrays;  // restore_checkpoint: this process's part of each target, in order
  uint64_t header_bytes_read = 0;  // the manifest and the data files' headers
  uint64_t data_bytes_read = 0;    // chunk bytes
};

// Collective over `transport`: every process restores the same targets (a
// subset of the checkpoint's tensors, in any order) and gets its own part.
// Each process reads only the byte ranges its devices need (rounded out to
// checksum blocks when verifying), and a range that several of its devices
// need once (from a store: by byte-range reads of the data file objects,
// nothing else of them). A checksum
// mismatch is Error(kChecksumMismatch) naming the tensor, the chunk and the
// file; no byte that failed its check is ever copied into an array. A
// failure on any process fails the restore on every process.
RestoreResult restore_checkpoint(const storage::Location& path, std::span<const RestoreTarget> targets,
                                 Transport& transport, const RestoreOptions& options = {});

// The same into arrays allocated by the caller (names choose the tensors;
// shape and dtype must match the saved ones, Error(kInvalidArgument)). The
// result's `arrays` is empty: the bytes are in `arrays`.
RestoreResult restore_checkpoint_into(const storage::Location& path, std::span<NamedArray> arrays,
                                      Transport& transport, const RestoreOptions& options = {});

}  // namespace reshard
