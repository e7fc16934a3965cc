// `export`: a model in a training framework's layout (a reshard checkpoint,
// sharded arrays in memory, or tensors read through the caller's function) to a Hugging Face model folder, a PEFT adapter
// folder or a merged model, through a tensor map, written by every process of
// a job at once without gathering the model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reshard/execute/transport.h"
#include "reshard/formats/hf_split.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/lora_config.h"
#include "reshard/pipelines/named_array.h"
#include "reshard/pipelines/tensor_map.h"
#include "reshard/storage/location.h"

namespace reshard {

// Checkpoint metadata keys an export reads when the options do
// not give the texts themselves: the Hugging Face config.json written beside
// a model's weights, and the LoRA adapter's adapter_config.json (its r, alpha,
// patterns: what a merge scales by and what --adapter-only writes).
inline constexpr std::string_view kHfConfigMetadataKey = "reshard.hf_config";
inline constexpr std::string_view kLoraConfigMetadataKey = "reshard.lora_config";
// generation_config.json, carried from the folder a checkpoint was made from
// to the folders made from it.
inline constexpr std::string_view kGenerationConfigMetadataKey = "reshard.generation_config";

// An export that needs a LoRA config (an adapter, a merge) found none, neither
// in its options nor in the checkpoint's metadata: kInvalidArgument under a name
// of its own, so that a front end can say which of its arguments gives one.
inline constexpr ErrorKind kNoLoraConfig{ErrorCode::kInvalidArgument, "no_lora_config"};

enum class ExportKind {
  kModel,        // the map's non-LoRA outputs as a Hugging Face model folder
  // The map's adapter outputs (every name under "base_model.model.": LoRA
  // factors of Linear and Embedding layers, DoRA magnitudes, lora_B biases,
  // modules_to_save copies) as a PEFT adapter folder.
  kAdapterOnly,
  // The model with the adapter merged as merge-lora merges it (W += B @ A *
  // scaling, DoRA's rescaling, lora_B's bias, modules_to_save copies in place
  // of the base's tensors).
  kMergedModel,
};

struct ExportOptions {
  ExportKind kind = ExportKind::kModel;
  // Cast F32/F16/BF16 outputs to this (a map rule's own dtype wins).
  std::optional<DType> dtype;
  uint64_t max_shard_size = kDefaultMaxShardSize;
  // A Hugging Face base model folder, local or in an object store. For
  // kAdapterOnly, the model whose modules adapter keys must each name (Error
  // kMissingTensor naming the key; without it, an adapter's keys are checked
  // against the exported model's own outputs). For kMergedModel from a
  // source of LoRA factors alone (a LoRA run's checkpoint), the weights they
  // merge into, read box by box where the blocks need them, and the
  // config.json written unless hf_config_json is given; a source with
  // weights of its own beside the base is refused (kInvalidArgument).
  std::optional<storage::Location> base;
  // Stream every piece to this rank, which alone writes (for an output folder
  // the processes do not share); memory bounded per tensor block. Without it
  // every process writes its pieces at their final offsets and rank 0 commits.
  std::optional<int> gather_to;
  // Write over an existing folder's weight files (keeping its other files).
  bool replace = false;
  // config.json / adapter_config.json; when absent, taken from the
  // checkpoint's metadata keys above (a model export without any writes no
  // config.json; an adapter export without a LoRA config is an error).
  std::optional<std::string> hf_config_json;
  std::optional<LoraConfig> lora_config;
  // At most this many bytes of an output tensor (a range of its rows, or one
  // row when larger) are produced at a time: what bounds memory per process.
  uint64_t block_bytes = uint64_t{64} << 20;
  // Blocks a process holds at once when it writes its own: 2 reads and
  // produces block k+1 while block k is written; 1 does one block at a time
  // (least memory). Memory per process is about this many blocks.
  size_t blocks_in_flight = 2;
  // An output in an object store (s3://, gs://) is uploaded in parts of this
  // many bytes (0: the store's default, 64 MiB; S3 takes 5 MiB to 5 GiB), each
  // by the process that produces most of it, `parts_in_flight` at once per
  // process: memory per process is about that many parts plus the blocks.
  uint64_t part_bytes = 0;
  uint32_t parts_in_flight = 4;
  // Called with output bytes this process has just produced, for progress.
  std::function<void(uint64_t bytes)> progress;
};

// Where one process's export time went, in seconds (what `reshard bench
// export` breaks down). Writing runs on a thread of its own beside reading
// and producing, so the phases overlap and need not add up to the total.
struct ExportTimes {
  double read = 0;     // reading source bytes (a part of produce)
  double produce = 0;  // producing this process's blocks, reads included
  double write = 0;    // writing them at their offsets (or, gathering, on the writing process)
  double sync = 0;     // flushing this process's writes to storage, once per file
  double commit = 0;   // agreeing with the peers, and committing the folder
  double total = 0;
};

struct ExportResult {
  size_t tensors = 0;        // tensors in the output
  size_t merged = 0;         // weights a LoRA delta was merged into
  size_t files = 0;          // weight files written
  uint64_t bytes = 0;        // tensor bytes of the output
  uint64_t bytes_written = 0;  // tensor bytes this process wrote
  ExportTimes seconds;         // this process's
  // Whether the folder got a config.json (from the options, the base model
  // or the checkpoint's metadata): transformers loads a model folder by it.
  bool wrote_config_json = false;
};

// Collective over `transport`. Resolves `map` against the checkpoint's
// tensors (all errors, naming tensor and rule, before anything is written),
// plans the output folder identically on every process, and has each process
// produce and write a share of the output (balanced by bytes), reading only
// the checkpoint byte ranges its share needs. `checkpoint` is a local folder
// or a folder in an object store (read by byte ranges). `out` is a local folder or a
// prefix in an object store, where each process uploads the parts of each
// file it produced. The folder appears complete or not at all (in a store:
// each file appears whole, and the index last); a failure on any process
// fails the export on every one.
ExportResult export_checkpoint(const storage::Location& checkpoint, const storage::Location& out,
                               const TensorMap& map, Transport& transport, const ExportOptions& options = {});

// The same from sharded arrays in memory (one call per process, same names,
// shapes, dtypes and layouts everywhere): each process writes the output
// pieces whose source bytes its own devices hold; only the options give the
// configs.
ExportResult export_arrays(std::span<const NamedArray> arrays, const storage::Location& out,
                           const TensorMap& map, Transport& transport, const ExportOptions& options = {});

// Tensors read through the caller's function (a checkpoint in a format
// reshard does not read itself, such as an Orbax or Levanter checkpoint read
// through TensorStore). Every process must be able to read any box of any
// tensor: blocks are assigned as for a checkpoint folder, so a process holds
// only the blocks it has in flight, never its share of the model.
struct TensorSource {
  std::vector<safetensors::TensorSpec> specs;  // the same on every process
  // Fills `out` with `box` (in source coordinates) of tensor specs[source],
  // dense and row-major in the box, in the tensor's dtype. Called from
  // several threads at once; an exception from it fails the export on every
  // process, its message naming the tensor.
  std::function<void(size_t source, const Box& box, std::span<std::byte> out)> read;
};

// The same from a TensorSource (one call per process, the same specs
// everywhere): only the options give the configs.
ExportResult export_source(const TensorSource& source, const storage::Location& out, const TensorMap& map,
                           Transport& transport, const ExportOptions& options = {});

}  // namespace reshard
