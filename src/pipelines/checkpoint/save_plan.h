// Which process writes which chunk of a checkpoint, and where: computed the
// same on every process from the arrays' shapes and layouts alone.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "formats/checksum.h"
#include "reshard/formats/checkpoint_manifest.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/pipelines/named_array.h"

namespace reshard::pipelines_detail {

// What a save needs to know of an array to plan it: no bytes.
struct SaveTensor {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  NamedSharding sharding;
  Topology topology;
  std::optional<safetensors::Metadata> metadata;

  // The description of `named`.
  static SaveTensor of(const NamedArray& named);
};

// One distinct, non-empty slice of an array, stored once.
struct PlannedChunk {
  size_t array = 0;     // index into the arrays saved
  DType dtype = DType::kF32;
  Box box;              // global coordinates
  int writer = 0;       // the process that writes it (one of its holders)
  DeviceId device = 0;  // the writer's device whose shard holds it
  std::string key;      // its tensor name in the data file
};

class SavePlan {
 public:
  // Chunks in array order, then in mesh order of their first holder. Each is
  // written by the holder process with the fewest bytes assigned so far (ties
  // go round the holders), so replicas' writing is spread over their holders.
  // Error(kInvalidArgument) for repeated names or arrays whose topology has
  // another number of processes.
  static SavePlan make(std::span<const NamedArray> arrays, int num_processes);
  // The same from descriptions of the arrays.
  static SavePlan make(std::span<const SaveTensor> tensors, int num_processes);

  const std::vector<PlannedChunk>& chunks() const { return chunks_; }
  // A hash of every chunk's name, dtype, box and writer: equal on processes
  // that plan the same save, so that they can check they do.
  uint64_t fingerprint() const;
  // Indices into chunks() that `process` writes, in its data file's order.
  const std::vector<size_t>& chunks_of(int process) const { return by_process_.at(static_cast<size_t>(process)); }
  // The data file of `process`, or nullopt when it writes nothing.
  const std::optional<safetensors::FileLayout>& file_of(int process) const {
    return files_.at(static_cast<size_t>(process));
  }
  // Chunk bytes each process writes.
  const std::vector<uint64_t>& bytes_per_process() const { return bytes_; }

  // The manifest once every chunk's checksums are known (`checksums[i]` of
  // chunks()[i], in blocks of `block_bytes`, 0 for version 1), with each
  // tensor's saved layout and metadata.
  checkpoint::Manifest manifest(std::span<const SaveTensor> tensors,
                                std::span<const formats_detail::BlockChecksums> checksums, uint64_t block_bytes,
                                std::optional<safetensors::Metadata> metadata) const;

 private:
  std::vector<PlannedChunk> chunks_;
  std::vector<std::vector<size_t>> by_process_;
  std::vector<std::optional<safetensors::FileLayout>> files_;
  std::vector<uint64_t> bytes_;
};

// "data-00003.safetensors": the data file process 3 writes.
std::string data_file_name(int process);

}  // namespace reshard::pipelines_detail
