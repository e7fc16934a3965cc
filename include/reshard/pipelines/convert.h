// Conversion between a .safetensors file, a Hugging Face folder and a reshard
// checkpoint (either way, or checkpoint to checkpoint in a new layout), run
// by all the processes of a job together: they share the reading and the
// writing, and one commits.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "reshard/execute/transport.h"
#include "reshard/formats/hf_split.h"
#include "reshard/layout/dtype.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "reshard/pipelines/layout_rules.h"
#include "reshard/storage/location.h"
#include "reshard/storage/object_writer.h"

namespace reshard {

enum class ConvertOutput { kSafetensorsFile, kHfFolder, kCheckpoint };

struct ConvertOptions {
  ConvertOutput output = ConvertOutput::kSafetensorsFile;
  // Cast F32/F16/BF16 tensors to this float type (others stay as they are).
  std::optional<DType> dtype;
  // Largest file of a Hugging Face folder.
  uint64_t max_shard_size = kDefaultMaxShardSize;
  // Replace an existing destination (a file whole; a folder's weight files;
  // a checkpoint at its final rename).
  bool replace = false;
  // The layout of a checkpoint output (required for one).
  std::optional<CheckpointLayout> layout;
  // Called with the bytes this process has just written, for progress.
  std::function<void(uint64_t)> progress;
  // A checkpoint output: host memory for the pieces read and waiting to be
  // written (a background thread writes each while the next are read); at
  // most this many bytes are held at once, plus, when casting, one piece in
  // the source's dtype.
  uint64_t staging_bytes = kDefaultStagingBytes;
  // A destination in an object store: each file is uploaded in parts of this
  // size (0: the store's default), at most parts_in_flight at once per process.
  storage::UploadOptions upload;
};

struct ConvertResult {
  size_t files = 0;      // files written (data files for a checkpoint)
  size_t tensors = 0;
  uint64_t bytes = 0;    // tensor bytes of the output
  uint64_t peak_staged_bytes = 0;  // a checkpoint output: most bytes this process held staged at once
  // A folder output: the non-weight files written beside the weights (on process 0).
  std::vector<std::string> carried;
  // What the output lacks that its users will miss (a folder without config.json).
  std::vector<std::string> warnings;
};

// Collective over `transport`. Reads `src` (a .safetensors file, a Hugging
// Face folder or a checkpoint, told apart by what is there) and writes `dst`
// as `options.output` says. A file written from a file keeps the source's
// metadata exactly (so a rewrite is byte-identical); folders and files made
// from checkpoints get "format": "pt" when the source has no format. A
// folder made from a folder carries its non-weight files (config.json with
// its dtype keys following options.dtype, generation_config.json, the
// tokenizer's files, ...); one made from a checkpoint gets config.json and
// generation_config.json from the checkpoint's metadata (kHfConfigMetadataKey,
// kGenerationConfigMetadataKey), which a checkpoint made from a folder takes
// from the folder's files; a folder output with no config.json to carry gets a
// warning in the result. Each
// process reads only the parts it writes (for a checkpoint output, the
// chunks of the new layout it writes, streamed through
// `options.staging_bytes` of memory); the output appears only when complete, and a
// failure on any process fails the conversion on every one.
// `src` and `dst` may each be local or in an object store (s3://, gs://):
// a source there is read by byte ranges; a file or folder written there has
// each file uploaded as one parallel upload whose parts are dealt to the
// processes (each reads what its parts hold), completed by process 0, then
// the configs and last the index; an existing destination is refused before
// anything is uploaded unless `replace` (which then removes the old weight
// files the new folder lacks, last), and a failure leaves no upload pending
// and nothing in a destination that was empty.
ConvertResult convert_model(const storage::Location& src, const storage::Location& dst, Transport& transport,
                            const ConvertOptions& options = {});

// What a conversion to `dst` writes when the caller does not say (the CLI's
// rule, which the Python API shares): a checkpoint when a layout is given;
// else one .safetensors file for a `dst` named *.safetensors that is not an
// existing folder (in a store: a prefix with objects under it); else a
// Hugging Face folder.
ConvertOutput convert_output_for(const storage::Location& dst, bool with_layout);

}  // namespace reshard
