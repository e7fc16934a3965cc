// Reading a reshard checkpoint folder, local or in an object store (s3://,
// gs://, memory://): the manifest and every data file's header validated at
// open; chunk bytes read by positional reads (objects: byte-range reads) and
// checked against their checksums (per block in version 2, per chunk in
// version 1) before any of them is handed out.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "reshard/formats/checkpoint_manifest.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/storage/location.h"

namespace reshard::checkpoint {

// Whether `folder` looks like a checkpoint (it holds a manifest): in a store,
// whether the object FOLDER/manifest.json exists. A store that cannot be
// reached or refuses the credentials is an error, not a "no".
bool is_checkpoint(const storage::Location& folder);

// Bytes this reader has read from the files, for tests and statistics.
struct ReadCounters {
  uint64_t header_bytes = 0;  // the manifest and the data files' headers
  uint64_t data_bytes = 0;    // chunk bytes
};

// An open, validated checkpoint. Copies share the open files; const methods
// are thread safe. Errors name the file, and for chunks the tensor and chunk.
class Reader {
 public:
  // Reads and validates the manifest, then checks every data file: present,
  // of the size the manifest gives, a valid safetensors file whose tensor
  // `key` of each chunk has the chunk's dtype, shape and offset. Missing or
  // truncated files are Error(kIo) / Error(kIncompleteBuffer) naming the file
  // and the first chunk they hold. In a store the folder is listed once and
  // each data file's header read by ranges; no chunk byte is read here.
  static Reader open(const storage::Location& folder);

  const storage::Location& folder() const;
  const Manifest& manifest() const;
  // The tensor called `name`; Error(kMissingTensor) naming it.
  const TensorEntry& tensor(std::string_view name) const;

  // Reads chunk `chunk` of `tensor` whole into `out` (exactly its length) and
  // checks every checksum it has (each block's and the whole chunk's):
  // Error(kChecksumMismatch) naming tensor, chunk (and block) and file, after
  // which `out` holds no data to be used.
  void read_chunk(const TensorEntry& tensor, size_t chunk, std::span<std::byte> out) const;
  // Reads into `chunk_bytes` (the chunk's length, laid out as the chunk) the
  // checksum blocks that hold any byte of `parts` (boxes inside the chunk,
  // global coordinates), each read once and verified before this returns;
  // the other bytes of `chunk_bytes` are left as they were. A version 1
  // chunk is one block. Returns the bytes read.
  uint64_t read_chunk_blocks(const TensorEntry& tensor, size_t chunk, std::span<const Box> parts,
                             std::span<std::byte> chunk_bytes) const;
  // Reads the part `box` (global coordinates, inside the chunk) of a chunk,
  // dense in the box's shape, without checking any checksum.
  void read_chunk_part(const TensorEntry& tensor, size_t chunk, const Box& box, std::span<std::byte> out) const;
  // Reads `box` of a tensor (dense, row-major in the box's shape) from the
  // chunks it meets, reading and verifying only the blocks it meets.
  void read_box(const TensorEntry& tensor, const Box& box, std::span<std::byte> out) const;

  // Bytes read so far through this reader and its copies.
  ReadCounters counters() const;

 private:
  struct State;
  explicit Reader(std::shared_ptr<State> state);
  const safetensors::File& file_of(const Chunk& chunk) const;
  // Reads `out.size()` bytes of a chunk from `offset` into the chunk, no check.
  void read_chunk_range(const TensorEntry& tensor, size_t chunk, uint64_t offset, std::span<std::byte> out) const;
  // Checks block `block` of a chunk, whose bytes are `bytes`.
  void check_block(const TensorEntry& tensor, size_t chunk, size_t block, std::span<const std::byte> bytes) const;

  std::shared_ptr<State> state_;
};

}  // namespace reshard::checkpoint
