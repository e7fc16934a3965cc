// An import decided before any byte moves: the map run backwards against the
// folder's tensors, and every framework tensor's sharding. Every process
// computes the same plan from the same folder and options.
#pragma once

#include <vector>

#include "pipelines/import/import_source.h"
#include "pipelines/tensor_map/tensor_map_resolve.h"
#include "reshard/layout/sharding.h"
#include "reshard/pipelines/import_model.h"

namespace reshard::pipelines_detail {

struct ImportPlan {
  ResolvedMap map;                       // Hugging Face tensors (sources) to framework tensors (outputs)
  std::vector<NamedSharding> shardings;  // by output
};

// The axis sizes the backwards map splits merged axes by: the folder's
// config.json's (llama_axis_sizes_from_config, and num_hidden_layers as
// `layer`, the preset's stack axis), the caller's winning.
AxisSizes import_axis_sizes(const ImportSource& source, const ImportOptions& options);

// Inverts `forward_map` (framework to Hugging Face, as export takes it) and
// resolves it against `source`'s tensors: every tensor must be matched; a
// rule matching nothing is an error unless optional, or unless the folder
// holds only an adapter (whose model rules then have nothing to match).
// Errors name the tensor and the rule, or the tensor whose layout does not fit.
ImportPlan plan_import(const ImportSource& source, const TensorMap& forward_map, const CheckpointLayout& layout,
                       const ImportOptions& options);

}  // namespace reshard::pipelines_detail
