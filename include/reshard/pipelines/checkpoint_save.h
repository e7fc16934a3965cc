// Saving sharded arrays as a reshard checkpoint from every process at once,
// into a local folder or an object store's folder (s3://, gs://, memory://).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "reshard/execute/transport.h"
#include "reshard/formats/checkpoint_manifest.h"
#include "reshard/formats/safetensors_header.h"
#include "reshard/pipelines/named_array.h"
#include "reshard/storage/location.h"

namespace reshard {

// Host memory a save or conversion may hold staged by default.
inline constexpr uint64_t kDefaultStagingBytes = uint64_t{1} << 30;

struct SaveOptions {
  // The checkpoint's own metadata (string to string), kept in its manifest.
  std::optional<safetensors::Metadata> metadata;
  // Replace a checkpoint already at the path (at the final rename only; in
  // an object store, once every process's data file is uploaded).
  // Without it an existing checkpoint is Error(kAlreadyExists), as every
  // writer's output is (convert, export, merge). A path that holds anything
  // but a checkpoint or an empty folder is never replaced.
  bool replace = false;
  // save_checkpoint_async: host memory for staging copies of this
  // process's chunks. Chunks are staged in pieces (a quarter of the budget
  // at most, 64 MiB at most) that a background thread writes while the next
  // are staged; at most this many bytes are staged at once (a piece is at
  // least one element).
  uint64_t staging_bytes = kDefaultStagingBytes;
  // Each chunk gets a checksum per block of this many bytes (the last
  // shorter), so that a restore needing part of a chunk reads and verifies
  // only the blocks it needs. 0 writes format version 1 (one checksum per
  // chunk), which older readers read.
  uint64_t checksum_block_bytes = checkpoint::kDefaultBlockBytes;
  // In an object store: each data file is uploaded in parts of this many
  // bytes (0: the store's default), at most parts_in_flight at once per
  // process, which bounds the memory an upload holds.
  uint64_t part_bytes = 0;
  uint32_t parts_in_flight = 4;
};

// What one process did.
struct SaveResult {
  uint64_t chunks_written = 0;
  uint64_t bytes_written = 0;  // chunk bytes this process wrote
  // save_checkpoint_async: 1 + the times staging waited for the writer to
  // free staging memory (1 when the save fits in the budget).
  uint64_t waves = 0;
  uint64_t peak_staged_bytes = 0;  // save_checkpoint_async: most bytes staged at once
};

// The result of an asynchronous save, collected with wait().
class SaveHandle {
 public:
  SaveHandle();
  SaveHandle(SaveHandle&&) noexcept;
  SaveHandle& operator=(SaveHandle&&) noexcept;
  // Waits if wait() was not called (errors are then lost: call wait()).
  ~SaveHandle();

  // Blocks until the save is committed everywhere, or failed; rethrows the
  // failure (this process's own, or Error(kPeerFailed) naming the rank that
  // failed). Call once.
  SaveResult wait();
  // Whether wait() would return at once.
  bool ready() const;

 private:
  struct State;
  explicit SaveHandle(std::shared_ptr<State> state);
  // The one way to make a handle of a running save.
  friend SaveHandle save_checkpoint_async(std::span<const NamedArray> arrays, const storage::Location& path,
                                          Transport& transport, const SaveOptions& options);

  std::shared_ptr<State> state_;
};

// Collective over `transport` (one call per process, same names, shapes,
// dtypes and layouts everywhere; `transport.size()` processes, this one
// `transport.rank()`, matching every array's topology). Writes `arrays` as
// the checkpoint folder `path`: every process writes the chunks it holds
// into a data file of its own (a chunk held by several devices or processes
// is written once, by one of its holders, the holders sharing that work);
// everything goes into a temporary sibling folder, data files are fsynced,
// one process writes the manifest last and renames the folder into place.
// A failure on any process fails the save on every process and leaves what
// was at `path` before.
// In an object store each process uploads its data file as one object (in
// parts, as its bytes come), none completed until every process has all its
// parts in; then the objects appear, and process 0 writes the manifest last:
// the checkpoint appears when its manifest does. A failure on any process
// aborts every upload and leaves no manifest and no pending upload; one in
// the short last step (the objects appearing) also loses a checkpoint being
// replaced. The steps, and what a reader sees during a replace, are in
// docs/checkpoint-format.md.
SaveResult save_checkpoint(std::span<const NamedArray> arrays, const storage::Location& path, Transport& transport,
                          const SaveOptions& options = {});

// The same, returning once every byte of this process's chunks is copied
// into staging buffers or written: a background thread writes staged pieces
// while the caller stages the next ones, within the staging budget, so the
// caller waits for writing only where the save is larger than the budget.
// The rest of the writing and the commit go on in the background. `arrays`
// may change as soon as it returns; `transport` must not be used by
// anything else until wait() returns.
SaveHandle save_checkpoint_async(std::span<const NamedArray> arrays, const storage::Location& path,
                                 Transport& transport, const SaveOptions& options = {});

}  // namespace reshard
