// The manifest of a reshard checkpoint (docs/checkpoint-format.md): which
// tensors it holds and where each stored chunk's bytes are, with checksums.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/formats/safetensors_header.h"
#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"

namespace reshard::checkpoint {

// The manifest's file name inside a checkpoint folder; written last.
inline constexpr std::string_view kManifestFileName = "manifest.json";
// The value of the manifest's "format" key.
inline constexpr std::string_view kFormatName = "reshard-checkpoint";
// The version this build writes (2: a checksum per block of each chunk).
inline constexpr int64_t kFormatVersion = 2;
// The oldest version this build reads (1: one checksum per chunk); any
// version outside [kOldestFormatVersion, kFormatVersion] is refused by name.
inline constexpr int64_t kOldestFormatVersion = 1;
// The checksum block size saves use unless told otherwise.
inline constexpr uint64_t kDefaultBlockBytes = uint64_t{1} << 20;
// A manifest larger than this is refused before it is parsed.
inline constexpr uint64_t kMaxManifestBytes = uint64_t{1} << 30;

// One stored piece of a tensor: a box of it, dense and row-major, as one
// tensor of a data file.
struct Chunk {
  Box box;              // global coordinates in the tensor
  std::string file;     // data file name, in the checkpoint folder
  std::string key;      // the safetensors tensor name inside that file
  uint64_t offset = 0;  // absolute byte offset of the bytes in the file
  uint64_t length = 0;  // bytes: the box's size in the tensor's dtype
  uint64_t xxh64 = 0;   // checksum of those bytes
  // Version 2: the checksum of each block of the bytes (block_bytes long,
  // the last one shorter), so that part of a chunk can be read verified.
  // Empty in version 1.
  std::vector<uint64_t> blocks;
  bool operator==(const Chunk&) const = default;
};

// One saved tensor: what it is and where its chunks are. The chunks cover
// the tensor exactly once (replicas are stored once).
struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::string layout;  // the layout it was saved from, for people (NamedSharding::to_string)
  std::optional<safetensors::Metadata> metadata;  // user metadata, string to string
  std::vector<Chunk> chunks;
  bool operator==(const TensorEntry&) const = default;
};

// A data file of the checkpoint: a valid safetensors file of exactly `size` bytes.
struct DataFile {
  std::string name;
  uint64_t size = 0;
  bool operator==(const DataFile&) const = default;
};

struct Manifest {
  std::optional<safetensors::Metadata> metadata;  // the checkpoint's own metadata
  // The checksum block size of every chunk (version 2); 0 for version 1,
  // whose chunks have one checksum each.
  uint64_t block_bytes = 0;
  std::vector<DataFile> files;
  std::vector<TensorEntry> tensors;  // in save order

  // The tensor called `name`, or nullptr.
  const TensorEntry* find(std::string_view name) const;
  // 2 when chunks carry block checksums, else 1.
  int64_t version() const { return block_bytes == 0 ? 1 : 2; }
  // Sum of every tensor's bytes, overflow-checked.
  uint64_t total_bytes() const;
  bool operator==(const Manifest&) const = default;
};

// The safetensors name of a chunk in its data file: "NAME[0:2,4:8]".
std::string chunk_key(std::string_view tensor, const Box& box);

// Bytes of a tensor (or box) of `shape` in `dtype`; Error(kOverflow).
uint64_t dense_bytes(DType dtype, const Shape& shape);

// Blocks of `block_bytes` (> 0) that `length` bytes make, the last shorter.
uint64_t block_count(uint64_t length, uint64_t block_bytes);

// The manifest file's bytes: format, version (manifest.version(): 2 with
// block checksums, 1 without), the body's checksum, the body.
std::string serialize_manifest(const Manifest& manifest);

// Parses and validates a manifest file's bytes; `where` names it in errors.
// Error(kInvalidManifest) for anything malformed or inconsistent (bad JSON or
// types, an unknown format or version, names repeated, block checksums that
// do not match the chunk's length and block size, chunks outside their
// tensor, overlapping or leaving holes, lengths that disagree with boxes,
// offsets past their file), naming the tensor and chunk at fault;
// Error(kChecksumMismatch) when the body does not match its checksum.
Manifest parse_manifest(std::string_view bytes, std::string_view where);

// Checks a manifest built in memory by the same rules (writers call it
// before committing). Error(kInvalidManifest).
void validate_manifest(const Manifest& manifest, std::string_view where);

}  // namespace reshard::checkpoint
