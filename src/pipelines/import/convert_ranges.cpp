#include "pipelines/import/convert_ranges.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

using layout_detail::checked_mul;

namespace {

// The bytes of one row (the tensor's first axis) in `dtype`, or 0 when a row
// is not whole bytes (then the tensor is read whole) or the tensor is a scalar.
uint64_t row_bytes(const safetensors::TensorInfo& tensor) {
  if (tensor.shape.empty()) return 0;
  uint64_t elements = 1;
  for (size_t d = 1; d < tensor.shape.size(); ++d) elements = checked_mul(elements, tensor.shape[d], "row size");
  const uint64_t bits = checked_mul(elements, static_cast<uint64_t>(dtype_bits(tensor.dtype)), "row size");
  return bits % 8 == 0 ? bits / 8 : 0;
}

// Rows [first, last) of `tensor`.
Box rows(const safetensors::TensorInfo& tensor, uint64_t first, uint64_t last) {
  const Shape shape = safetensors::layout_shape(tensor.shape, tensor.name);
  std::vector<int64_t> origin(shape.size(), 0);
  Shape extent = shape;
  origin[0] = static_cast<int64_t>(first);
  extent[0] = static_cast<int64_t>(last - first);
  return Box(std::move(origin), std::move(extent));
}

// Sends the bytes of [from, to) of `tensor` (offsets in the tensor's data),
// from a block of it that starts at tensor byte `block_start`.
uint64_t send_clipped(std::span<const std::byte> block, uint64_t block_start, uint64_t from, uint64_t to,
                      uint64_t tensor_file_offset, const FileBytesSink& sink) {
  const uint64_t lo = std::max(from, block_start), hi = std::min(to, block_start + block.size());
  if (lo >= hi) return 0;
  sink(tensor_file_offset + lo, block.subspan(static_cast<size_t>(lo - block_start), static_cast<size_t>(hi - lo)));
  return hi - lo;
}

uint64_t write_tensor_range(const ConvertSource& source, size_t source_tensor, const safetensors::TensorInfo& tensor,
                            uint64_t file_offset, uint64_t from, uint64_t to, const FileBytesSink& sink,
                            uint64_t block_bytes) {
  const uint64_t row = row_bytes(tensor);
  if (row == 0) {
    const Box whole = Box::whole(safetensors::layout_shape(tensor.shape, tensor.name));
    const std::vector<std::byte> bytes = read_cast(source, source_tensor, whole, tensor.dtype);
    return send_clipped(bytes, 0, from, to, file_offset, sink);
  }
  const uint64_t rows_per_block = std::max<uint64_t>(1, block_bytes / row);
  const uint64_t last = (to + row - 1) / row;
  uint64_t written = 0;
  for (uint64_t first = from / row; first < last; first += rows_per_block) {
    const uint64_t stop = std::min(last, first + rows_per_block);
    const std::vector<std::byte> bytes = read_cast(source, source_tensor, rows(tensor, first, stop), tensor.dtype);
    written += send_clipped(bytes, first * row, from, to, file_offset, sink);
  }
  return written;
}

}  // namespace

uint64_t write_file_range(const ConvertSource& source, const std::unordered_map<std::string, size_t>& source_index,
                          const safetensors::FileLayout& layout, uint64_t begin, uint64_t end,
                          const FileBytesSink& sink, uint64_t block_bytes) {
  uint64_t written = 0;
  for (const safetensors::TensorInfo& tensor : layout.header().tensors()) {
    const uint64_t start = layout.header().file_offset(tensor);
    const uint64_t stop = start + tensor.byte_size();
    if (stop <= begin || start >= end || tensor.byte_size() == 0) continue;
    const auto found = source_index.find(tensor.name);
    if (found == source_index.end()) {
      throw Error(ErrorCode::kMissingTensor, fmt::format("tensor '{}' is not in the source", tensor.name));
    }
    try {
      written += write_tensor_range(source, found->second, tensor, start, std::max(begin, start) - start,
                                    std::min(end, stop) - start, sink, block_bytes);
    } catch (const Error& e) {
      throw e.with_context(fmt::format("tensor '{}'", tensor.name));
    }
  }
  return written;
}

}  // namespace reshard::pipelines_detail
