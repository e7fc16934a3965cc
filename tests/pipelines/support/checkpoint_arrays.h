// Arrays to save and check in checkpoint tests: every element a function of
// its global index and a version number, under any layout.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <string>
#include <vector>

#include "reshard/layout/mesh.h"
#include "reshard/layout/partition_spec.h"
#include "reshard/pipelines/checkpoint_restore.h"
#include "reshard/pipelines/named_array.h"
#include "support/temp_dir.h"

namespace reshard::testing {

// One tensor of the test model.
struct TensorDef {
  std::string name;
  Shape shape;
  DType dtype;
};

// A few tensors of several ranks and dtypes (a scalar, a replicated one).
std::vector<TensorDef> small_model();

// A layout: a mesh and one spec per tensor (specs past the rank are trimmed).
struct LayoutDef {
  Mesh mesh;
  std::vector<PartitionSpec> specs;  // by tensor; empty spec = replicated
  int processes = 1;
};

NamedSharding sharding_for(const LayoutDef& layout, const TensorDef& tensor, size_t index);
Topology topology_for(const LayoutDef& layout);

// This process's arrays of `model` under `layout`, values of `version`.
std::vector<NamedArray> make_arrays(const std::vector<TensorDef>& model, const LayoutDef& layout, int process,
                                    uint64_t version);

// Targets to restore `model` under `layout`.
std::vector<RestoreTarget> targets_for(const std::vector<TensorDef>& model, const LayoutDef& layout);

// Whether every shard holds exactly the values of `version`; a message if not.
std::string mismatch(const NamedArray& array, uint64_t version);

}  // namespace reshard::testing
