// Streaming a tensor out of a file in bounded pieces, cast on the way if asked.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>

#include "reshard/formats/safetensors_reader.h"
#include "reshard/layout/dtype.h"

namespace reshard {

// Receives bytes in order, in pieces of any size.
using ByteSink = std::function<void(std::span<const std::byte>)>;

// Produces all bytes of `tensor` (its dtype, shape and size as planned) into
// the sink: how a writer asks for each tensor of a file it writes.
using TensorProducer = std::function<void(const safetensors::TensorInfo& tensor, const ByteSink& sink)>;

// The dtype a tensor of `dtype` is written as under `--dtype target`: F32, F16
// and BF16 tensors take the target; every other (integer, bool, F64, F8...)
// keeps its own, since a cast would lose what it means.
DType cast_dtype(DType dtype, std::optional<DType> target);

// Sends the bytes of `tensor` in `file`, as `out` (the tensor's own dtype, or
// a castable float when the tensor is one: round to nearest even), to `sink`.
// Reads at most `block_bytes` of the file at a time (mmap views are passed on
// without a copy when nothing is cast). Error(kInvalidArgument) for a cast the
// converter cannot do.
void stream_tensor(const safetensors::File& file, const safetensors::TensorInfo& tensor, DType out,
                   const ByteSink& sink, size_t block_bytes = size_t{8} << 20);

}  // namespace reshard
