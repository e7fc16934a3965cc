// The byte runs a box covers inside a tensor's row-major data, for readers and
// writers of any dtype (sub-byte ones only where runs fall on whole bytes).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "reshard/formats/safetensors_header.h"
#include "reshard/layout/box.h"

namespace reshard::formats_detail {

// A run of bytes: where it sits in the tensor's data and in the dense box buffer.
struct ByteRun {
  uint64_t tensor_offset = 0;
  uint64_t box_offset = 0;
  uint64_t length = 0;
};

// Bytes of a dense box of `dtype`; Error(kUnsupported) when a sub-byte box
// does not fill whole bytes.
uint64_t box_byte_size(DType dtype, const Box& box);

// Calls `visit` for each contiguous byte run of `box` inside `tensor`, in
// increasing offset. Error(kInvalidArgument) when the box is not inside the
// tensor; Error(kUnsupported) when a sub-byte run does not start and end on a
// byte. Messages name the tensor.
void for_each_byte_run(const safetensors::TensorInfo& tensor, const Box& box,
                       const std::function<void(const ByteRun&)>& visit);

}  // namespace reshard::formats_detail
