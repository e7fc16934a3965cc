// `import`: a Hugging Face model folder (or PEFT adapter folder) into a
// training framework's layout through a tensor map run backwards, as a
// reshard checkpoint or as sharded arrays in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "reshard/execute/transport.h"
#include "reshard/formats/safetensors_header.h"
#include "reshard/layout/dtype.h"
#include "reshard/pipelines/export_model.h"
#include "reshard/pipelines/layout_rules.h"
#include "reshard/pipelines/named_array.h"
#include "reshard/pipelines/tensor_map.h"
#include "reshard/storage/location.h"
#include "reshard/storage/object_writer.h"

namespace reshard {

struct ImportOptions {
  // Cast F32/F16/BF16 tensors to this.
  std::optional<DType> dtype;
  // Axis sizes the shapes alone do not give (heads, head_dim...); the
  // folder's config.json gives llama_axis_sizes_from_config's, these win.
  AxisSizes sizes;
  // For a PEFT adapter folder alone: its base model (a folder, or its
  // config.json; local or in a store), whose config.json gives the sizes.
  // Without it, the adapter_config.json's base_model_name_or_path when that
  // is a local folder.
  std::optional<storage::Location> base;
  // Replace a checkpoint already at the output path (at the final rename);
  // without it an existing one is Error(kAlreadyExists), as for every writer.
  bool replace = false;
  std::function<void(uint64_t bytes)> progress;
  // A checkpoint saved to an object store: its data files' part size (0: the
  // store's default) and parts in flight per process (SaveOptions').
  storage::UploadOptions upload;
};

struct ImportResult {
  std::vector<NamedArray> arrays;  // import_arrays: this process's part of each framework tensor
  size_t tensors = 0;       // framework tensors produced
  uint64_t bytes = 0;       // their bytes
  uint64_t bytes_read = 0;  // source tensor bytes this process's copies read (each distinct slice once)
  // The folder's config.json under kHfConfigMetadataKey and adapter_config.json
  // under kLoraConfigMetadataKey (those present): the checkpoint metadata an
  // import saves, so that an export of it writes them back.
  safetensors::Metadata metadata;
};

// Collective over `transport`: every process builds the slices of the
// framework tensors its devices hold straight from the folder's files
// (reading only those byte ranges), returned as arrays in `layout` (the
// framework layout of every tensor: mesh, topology, rules).
// `map` is the forward map (framework to Hugging Face, as export and --map
// take it); import runs inverse_tensor_map of it. `hf_dir` is a model folder
// (model.safetensors or an index; an adapter_model.safetensors beside them is
// imported too), a PEFT adapter folder (the map's model rules may then match
// nothing) or a .safetensors file, local (its files memory-mapped) or in an
// object store (s3://, gs://: each slice's source byte ranges fetched, one
// piece of a slice held at a time). Every error (a tensor no rule matches, a
// shape that does not factor, a layout that does not fit, naming the tensor
// and the rule) is raised on every process before a byte is read.
ImportResult import_arrays(const storage::Location& hf_dir, const TensorMap& map, const CheckpointLayout& layout,
                           Transport& transport, const ImportOptions& options = {});

// The same, saved as the checkpoint `checkpoint`, local or in a store
// (save_checkpoint's commit; a failure anywhere leaves what was there). The
// result's `arrays` is empty: they are in the checkpoint.
ImportResult import_checkpoint(const storage::Location& hf_dir, const storage::Location& checkpoint,
                               const TensorMap& map, const CheckpointLayout& layout, Transport& transport,
                               const ImportOptions& options = {});

}  // namespace reshard
