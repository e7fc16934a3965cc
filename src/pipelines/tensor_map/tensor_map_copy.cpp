#include "pipelines/tensor_map/tensor_map_copy.h"

#include <vector>

#include <fmt/format.h>

#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {
namespace {

using Ranges = std::vector<Interval>;  // one per walk axis of a dimension

// Splits [begin, end) of a dimension whose walk axes have `sizes` (outer
// first, mixed radix) into boxes of those axes: a partial first row, whole
// rows, a partial last row, recursively.
void split_interval(std::span<const int64_t> sizes, int64_t begin, int64_t end, Ranges& prefix,
                    std::vector<Ranges>& out) {
  if (begin >= end) return;
  if (sizes.size() <= 1) {
    if (!sizes.empty()) prefix.push_back({begin, end});
    out.push_back(prefix);
    if (!sizes.empty()) prefix.pop_back();
    return;
  }
  int64_t inner = 1;
  for (size_t i = 1; i < sizes.size(); ++i) inner *= sizes[i];
  const auto rest = sizes.subspan(1);
  const auto with_digit = [&](int64_t q0, int64_t q1, int64_t b, int64_t e) {
    prefix.push_back({q0, q1});
    split_interval(rest, b, e, prefix, out);
    prefix.pop_back();
  };
  int64_t q0 = begin / inner;
  const int64_t q1 = end / inner, r0 = begin % inner, r1 = end % inner;
  if (q0 == q1) return with_digit(q0, q0 + 1, r0, r1);
  if (r0 != 0) {
    with_digit(q0, q0 + 1, r0, inner);
    ++q0;
  }
  if (q0 < q1) {
    prefix.push_back({q0, q1});
    for (const int64_t size : rest) prefix.push_back({0, size});
    out.push_back(prefix);
    prefix.resize(prefix.size() - 1 - rest.size());
  }
  if (r1 != 0) with_digit(q1, q1 + 1, 0, r1);
}

// Every combination of one entry per dimension.
void for_each_combination(const std::vector<std::vector<Ranges>>& per_dim, size_t dim, Ranges& chosen,
                          const std::function<void(const Ranges&)>& visit) {
  if (dim == per_dim.size()) return visit(chosen);
  for (const Ranges& ranges : per_dim[dim]) {
    chosen.insert(chosen.end(), ranges.begin(), ranges.end());
    for_each_combination(per_dim, dim + 1, chosen, visit);
    chosen.resize(chosen.size() - ranges.size());
  }
}

void add_region_pieces(const SourceRegion& region, const Box& out_box, size_t source_rank,
                       std::vector<OutputPiece>& pieces) {
  const Box part = out_box.intersect(region.out_box);
  if (part.empty()) return;
  const size_t rank = out_box.rank();
  const std::vector<int64_t> box_strides = row_major_strides(out_box.shape());
  std::vector<std::vector<Ranges>> per_dim(rank);
  for (size_t dim = 0; dim < rank; ++dim) {
    std::vector<int64_t> sizes;
    for (const FineAxis& axis : region.axes) {
      if (axis.out_dim == dim) sizes.push_back(axis.size);
    }
    const int64_t begin = part.origin()[dim] - region.out_box.origin()[dim];
    Ranges prefix;
    split_interval(sizes, begin, begin + part.shape()[dim], prefix, per_dim[dim]);
  }
  Ranges chosen;
  for_each_combination(per_dim, 0, chosen, [&](const Ranges& ranges) {
    OutputPiece piece;
    piece.source = region.source;
    std::vector<int64_t> out_start = region.out_box.origin();
    std::vector<int64_t> src_start = region.src_origin, src_last = region.src_origin;
    for (size_t a = 0; a < region.axes.size(); ++a) {
      const FineAxis& axis = region.axes[a];
      const Interval range = ranges[a];
      out_start[axis.out_dim] += range.begin * axis.out_factor;
      src_start[axis.src_dim] += range.begin * axis.src_factor;
      src_last[axis.src_dim] += (range.end - 1) * axis.src_factor;
      piece.shape.push_back(range.size());
      piece.src_dims.push_back(axis.src_dim);
      piece.src_factors.push_back(axis.src_factor);
      piece.dst_strides.push_back(axis.out_factor * box_strides[axis.out_dim]);
    }
    for (size_t dim = 0; dim < rank; ++dim) {
      piece.dst_offset += (out_start[dim] - out_box.origin()[dim]) * box_strides[dim];
    }
    Shape extent(source_rank);
    for (size_t dim = 0; dim < source_rank; ++dim) extent[dim] = src_last[dim] - src_start[dim] + 1;
    piece.source_box = Box(src_start, extent);
    pieces.push_back(std::move(piece));
  });
}

void check_out_size(const ResolvedTensor& tensor, const Box& out_box, std::span<const std::byte> out) {
  const uint64_t expected = dtype_byte_size(tensor.out.dtype, static_cast<uint64_t>(out_box.volume()));
  if (out.size() != expected) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("tensor '{}': box {} needs {} bytes, got {}",
                                                         tensor.out.name, out_box.to_string(), expected, out.size()));
  }
}

}  // namespace

StridedCopy OutputPiece::copy_from(const Box& held, DType src_dtype, DType dst_dtype) const {
  if (!held.contains(source_box)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("the piece reads source box {}, outside the held {}",
                                                         source_box.to_string(), held.to_string()));
  }
  const std::vector<int64_t> strides = row_major_strides(held.shape());
  StridedCopy copy;
  copy.shape = shape;
  copy.dst_strides = dst_strides;
  copy.dst_offset = dst_offset;
  copy.src_dtype = src_dtype;
  copy.dst_dtype = dst_dtype;
  for (size_t a = 0; a < shape.size(); ++a) copy.src_strides.push_back(src_factors[a] * strides[src_dims[a]]);
  for (size_t dim = 0; dim < held.rank(); ++dim) {
    copy.src_offset += (source_box.origin()[dim] - held.origin()[dim]) * strides[dim];
  }
  return copy;
}

std::vector<OutputPiece> output_box_pieces(const ResolvedTensor& tensor, const Box& out_box) {
  if (!Box::whole(safetensors::layout_shape(tensor.out)).contains(out_box) || out_box.rank() != tensor.out.shape.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("tensor '{}': box {} is not inside the tensor", tensor.out.name, out_box.to_string()));
  }
  std::vector<OutputPiece> pieces;
  if (out_box.empty()) return pieces;
  for (const SourceRegion& region : tensor.regions) {
    add_region_pieces(region, out_box, region.src_origin.size(), pieces);
  }
  return pieces;
}

void copy_output_box(const ResolvedMap& map, const ResolvedTensor& tensor, const Box& out_box,
                     const SourceBytes& sources, std::span<std::byte> out) {
  check_out_size(tensor, out_box, out);
  for (const OutputPiece& piece : output_box_pieces(tensor, out_box)) {
    const safetensors::TensorSpec& source = map.sources.at(piece.source);
    const std::span<const std::byte> bytes = sources(piece.source);
    const uint64_t source_bytes =
        dtype_byte_size(source.dtype, safetensors::element_count(source.shape, source.name));
    if (bytes.size() != source_bytes) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("source tensor '{}': {} bytes, expected {}", source.name, bytes.size(), source_bytes));
    }
    run_strided_copy(piece.copy_from(Box::whole(safetensors::layout_shape(source)), source.dtype, tensor.out.dtype), bytes.data(),
                     out.data());
  }
}

void copy_output_box_from_reads(const ResolvedMap& map, const ResolvedTensor& tensor, const Box& out_box,
                                const SourceBoxReader& read, std::span<std::byte> out) {
  check_out_size(tensor, out_box, out);
  std::vector<std::byte> held;
  for (const OutputPiece& piece : output_box_pieces(tensor, out_box)) {
    const safetensors::TensorSpec& source = map.sources.at(piece.source);
    held.resize(static_cast<size_t>(dtype_byte_size(source.dtype, static_cast<uint64_t>(piece.source_box.volume()))));
    read(piece.source, piece.source_box, held);
    run_strided_copy(piece.copy_from(piece.source_box, source.dtype, tensor.out.dtype), held.data(), out.data());
  }
}

}  // namespace reshard::pipelines_detail
