#include "reshard/formats/tensor_stream.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "layout/float_convert.h"
#include "reshard/layout/error.h"

namespace reshard {

using layout_detail::convert_floats;

namespace {

// Calls `visit(offset, bytes)` for consecutive pieces of the tensor, each at
// most `block` bytes: views into the mapping, or reads into `buffer`.
void for_each_piece(const safetensors::File& file, const safetensors::TensorInfo& tensor, size_t block,
                    std::vector<std::byte>& buffer,
                    const std::function<void(std::span<const std::byte>)>& visit) {
  const bool mapped = file.mode() == safetensors::ReadMode::kMmap;
  const std::span<const std::byte> whole = mapped ? file.view(tensor) : std::span<const std::byte>();
  const uint64_t size = tensor.byte_size();
  for (uint64_t offset = 0; offset < size;) {
    const size_t length = static_cast<size_t>(std::min<uint64_t>(block, size - offset));
    if (mapped) {
      visit(whole.subspan(static_cast<size_t>(offset), length));
    } else {
      buffer.resize(length);
      file.read(tensor, offset, buffer);
      visit(buffer);
    }
    offset += length;
  }
}

}  // namespace

DType cast_dtype(DType dtype, std::optional<DType> target) {
  return target && is_castable_float(dtype) ? *target : dtype;
}

void stream_tensor(const safetensors::File& file, const safetensors::TensorInfo& tensor, DType out,
                   const ByteSink& sink, size_t block_bytes) {
  std::vector<std::byte> buffer;
  if (out == tensor.dtype) {
    for_each_piece(file, tensor, std::max<size_t>(block_bytes, 1), buffer, sink);
    return;
  }
  if (!is_castable_float(tensor.dtype) || !is_castable_float(out)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("tensor '{}': cannot cast {} to {}", tensor.name, dtype_name(tensor.dtype),
                            dtype_name(out)));
  }
  // Whole elements per piece, so each piece converts on its own.
  const size_t in_width = element_bytes(tensor.dtype);
  const size_t out_width = element_bytes(out);
  const size_t block = std::max(block_bytes / in_width, size_t{1}) * in_width;
  std::vector<std::byte> converted;
  for_each_piece(file, tensor, block, buffer, [&](std::span<const std::byte> piece) {
    const size_t count = piece.size() / in_width;
    converted.resize(count * out_width);
    convert_floats(tensor.dtype, piece, out, converted, count);
    sink(converted);
  });
}

}  // namespace reshard
