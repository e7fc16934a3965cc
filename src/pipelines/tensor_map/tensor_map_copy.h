// Applying a resolved map: any box of an output tensor, produced by strided
// copies straight from the source bytes (transpose, unstack, merge and cast
// fused into each copy; no pass over memory of its own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "pipelines/tensor_map/strided_copy.h"
#include "pipelines/tensor_map/tensor_map_resolve.h"
#include "reshard/layout/box.h"

namespace reshard::pipelines_detail {

// The part of a box of an output tensor that one strided copy fills: it reads
// source `source` inside `source_box` and writes the box's dense buffer.
struct OutputPiece {
  size_t source = 0;
  Box source_box;                 // every element read lies in this box (source coordinates)
  Shape shape;                    // the walk
  std::vector<size_t> src_dims;   // per walk axis: the source dimension it steps along
  std::vector<int64_t> src_factors;  // ... and by how many elements of it
  std::vector<int64_t> dst_strides;  // elements of the out box's dense row-major buffer
  int64_t dst_offset = 0;

  // The copy that reads from a dense row-major buffer holding `held` of the
  // source (source coordinates; it must contain source_box, else
  // Error(kInvalidArgument)), such as a shard, or the whole tensor.
  StridedCopy copy_from(const Box& held, DType src_dtype, DType dst_dtype) const;
};

// The pieces that make up `out_box` (output coordinates) of `tensor`: disjoint,
// together covering the box. A merged output axis cut mid-way splits into at
// most a few pieces per axis; a whole output is one piece per source region.
std::vector<OutputPiece> output_box_pieces(const ResolvedTensor& tensor, const Box& out_box);

// The bytes of each whole source tensor (e.g. mmap views), by source index.
using SourceBytes = std::function<std::span<const std::byte>(size_t source)>;

// Writes `out_box` of `tensor` into `out` (dense, row-major in the box, in the
// output dtype), one strided copy per piece. Error(kInvalidArgument) when `out`
// or a source span has the wrong size.
void copy_output_box(const ResolvedMap& map, const ResolvedTensor& tensor, const Box& out_box,
                     const SourceBytes& sources, std::span<std::byte> out);

// Reads `box` (source coordinates) of source `source` into `out`, dense and
// row-major in the box, in the source's dtype (e.g. byte-range reads of an object).
using SourceBoxReader = std::function<void(size_t source, const Box& box, std::span<std::byte> out)>;

// The same as copy_output_box for sources without views: each piece's source
// box is read into a buffer of its own, then copied from there. Memory: one
// piece's source box at a time, never a whole model.
void copy_output_box_from_reads(const ResolvedMap& map, const ResolvedTensor& tensor, const Box& out_box,
                                const SourceBoxReader& read, std::span<std::byte> out);

}  // namespace reshard::pipelines_detail
