// Resolving a map against a set of tensors: the output tensors, and per output
// the strided source regions it is read from. Pure, and checked up front.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/box.h"
#include "reshard/pipelines/tensor_map.h"

namespace reshard::pipelines_detail {

struct ResolveOptions {
  std::optional<DType> dtype;    // cast F32/F16/BF16 tensors to this (a rule's own dtype wins)
  AxisSizes sizes;               // axis sizes known to the caller (e.g. from config.json); win over the map's
  bool skip_unmatched = false;   // drop tensors no rule matches instead of failing
  bool allow_unused_rules = false;  // a rule matching nothing is not an error (adapter-only exports)
};

// One axis of the walk that reads a region: a factor of one output dimension
// and of one source dimension. Index k along it is output element
// k * out_factor along out_dim, and source element k * src_factor along src_dim.
struct FineAxis {
  int64_t size = 0;
  size_t out_dim = 0;
  int64_t out_factor = 1;
  size_t src_dim = 0;
  int64_t src_factor = 1;
  bool operator==(const FineAxis&) const = default;
};

// The walk of a region whose output is its source as it is: each dimension
// onto itself (a rule without a rearrange, a merge base's tensor).
std::vector<FineAxis> identity_axes(const Shape& shape);

// A part of an output tensor read from one source tensor: `out_box` of the
// output (the whole output, or one slice along a stack axis) is the source
// walked along `axes` (in the output's row-major order) from `src_origin`.
struct SourceRegion {
  size_t source = 0;                // index into ResolvedMap::sources
  Box out_box;
  std::vector<int64_t> src_origin;  // source coordinates of out_box's first element
  std::vector<FineAxis> axes;       // product of sizes = out_box's volume
  bool operator==(const SourceRegion&) const = default;
};

// An output tensor: its name, dtype and shape, and where its bytes come from.
struct ResolvedTensor {
  safetensors::TensorSpec out;
  DType source_dtype = DType::kF32;
  size_t rule = 0;                     // index of the rule that made it
  std::vector<SourceRegion> regions;   // disjoint, covering the output, in output order
  bool operator==(const ResolvedTensor&) const = default;
};

struct ResolvedMap {
  std::vector<safetensors::TensorSpec> sources;  // as given
  std::vector<ResolvedTensor> outputs;           // in source order; unstacked tensors by index

  // The output called `name`, or nullptr.
  const ResolvedTensor* find(std::string_view name) const;
  // The outputs' specs, in order (what a writer plans files from).
  std::vector<safetensors::TensorSpec> output_specs() const;
};

// Resolves `map` against `sources`. Each source tensor is taken by the first
// rule whose `from` matches it. Errors (all before any byte moves), naming the
// tensor and the rule:
//   kInvalidArgument  a tensor no rule matches (unless skip_unmatched), or
//                     stacked tensors whose dtypes or shapes differ, or an
//                     index past a stack axis's known size;
//   kRank             a rearrange whose side has not the tensor's rank;
//   kIndivisible      a dimension that does not factor into the axis sizes;
//   kMissingTensor    a rule matching nothing (unless optional), or a stack
//                     missing an index (layers 0..N-1 must all be there, N
//                     the axis's size when known, else the highest index + 1);
//   kDuplicateTensor  two outputs with one name;
//   kUnsupported      a sub-byte dtype (F4, F6) the copies cannot address.
ResolvedMap resolve_tensor_map(const TensorMap& map, std::span<const safetensors::TensorSpec> sources,
                               const ResolveOptions& options = {});

}  // namespace reshard::pipelines_detail
