#include "box_bytes.h"

#include <fmt/format.h>

#include "formats/json_escape.h"
#include "layout/box_copy.h"
#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard::formats_detail {
using safetensors::layout_shape;

using safetensors::TensorInfo;

using layout_detail::BoxCopy;
using layout_detail::checked_mul;

namespace {

// Bits of `elements` elements; the caller checks they are whole bytes.
uint64_t bits_of(DType dtype, int64_t elements) {
  return checked_mul(static_cast<uint64_t>(elements), static_cast<uint64_t>(dtype_bits(dtype)),
                     "box size in bits");
}

[[noreturn]] void not_byte_aligned(const TensorInfo& tensor, const Box& box) {
  throw Error(ErrorCode::kUnsupported,
              fmt::format("tensor {}: box {} of a {} tensor does not start and end on whole bytes "
                          "({} bits per element)",
                          json_quoted(tensor.name), box.to_string(), dtype_name(tensor.dtype),
                          dtype_bits(tensor.dtype)));
}

}  // namespace

uint64_t box_byte_size(DType dtype, const Box& box) {
  const uint64_t bits = bits_of(dtype, box.volume());
  if (bits % 8 != 0) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("box {} of {} holds {} bits, not whole bytes", box.to_string(),
                            dtype_name(dtype), bits));
  }
  return bits / 8;
}

void for_each_byte_run(const TensorInfo& tensor, const Box& box,
                       const std::function<void(const ByteRun&)>& visit) {
  const Box whole = Box::whole(layout_shape(tensor.shape, tensor.name));
  if (!whole.contains(box)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("tensor {}: box {} is not inside its shape {}", json_quoted(tensor.name),
                            box.to_string(), whole.to_string()));
  }
  // Runs counted in elements (a box copy of one-byte elements), then in bits:
  // a sub-byte dtype's runs must start and end on whole bytes.
  BoxCopy(box, whole, box, 1).for_each_run([&](int64_t tensor_at, int64_t box_at, uint64_t, uint64_t length) {
    const uint64_t start_bits = bits_of(tensor.dtype, tensor_at);
    const uint64_t length_bits = bits_of(tensor.dtype, static_cast<int64_t>(length));
    if (start_bits % 8 != 0 || length_bits % 8 != 0) not_byte_aligned(tensor, box);
    visit(ByteRun{start_bits / 8, bits_of(tensor.dtype, box_at) / 8, length_bits / 8});
  });
}

}  // namespace reshard::formats_detail
