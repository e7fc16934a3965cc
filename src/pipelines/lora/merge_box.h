// LoRA merge on a box of a weight (a shard, a block of rows, or all of it):
// W += (B @ A) * scaling in f32, rounded back to W's dtype (round to nearest
// even), fetching only the rows of B and the columns of A the box needs.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string_view>

#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"

namespace reshard::pipelines_detail {

// Fills `out` with the box `box` of a factor, dense and row-major in its dtype.
using FactorReader = std::function<void(const Box& box, std::span<std::byte> out)>;

// One LoRA factor: its dtype (F32, F16 or BF16), shape and a way to read boxes of it.
struct LoraFactor {
  DType dtype = DType::kF32;
  Shape shape;
  FactorReader read;

  // A factor held whole in memory (`bytes` dense row-major, valid while used).
  static LoraFactor in_memory(DType dtype, Shape shape, std::span<const std::byte> bytes);
};

// One module's adapter: A is [r, in], B is [out, r]; W is [out, in], or
// [in, out] with fan_in_fan_out (GPT-2's Conv1D), where the delta is transposed.
struct LoraDelta {
  LoraFactor a;
  LoraFactor b;
  float scaling = 1;
  bool fan_in_fan_out = false;
};

// Checks A, B and W agree (ranks 2, A's rank = B's, in/out sizes, float dtypes).
// Error(kInvalidArgument) naming `module` and the shapes otherwise.
void check_lora_shapes(const LoraDelta& delta, const Shape& w_shape, DType w_dtype, std::string_view module);

// Writes into `out` (dense row-major over `w_box`, in `out_dtype`) the merged
// values of the box `w_box` of W, whose current values `w` holds (dense
// row-major over the box, in `w_dtype`). Per element, in f32: the products
// B[i,k] * A[k,j] summed for k = 0, 1, ... r-1, times scaling, plus W[i,j];
// rounded to w_dtype, then written as out_dtype. Reads B's rows and A's
// columns of the box only (for fan_in_fan_out: A's columns of the box's rows,
// B's rows of its columns). `out` may be `w` when the dtypes are equal.
void merge_lora_box(const LoraDelta& delta, const Box& w_box, DType w_dtype, std::span<const std::byte> w,
                    DType out_dtype, std::span<std::byte> out);

// Below this many bytes of a box's rows, another merging thread costs more than it saves.
constexpr size_t kMinMergeBytesPerThread = size_t{1} << 20;

// merge_lora_box with `w_box`'s rows split into contiguous ranges over at most
// `threads` threads (the caller's included), each range of at least
// kMinMergeBytesPerThread: the same bytes as one call. The factors' parts the
// box needs are read once, on the caller's thread, so their readers need not
// serve several threads.
void merge_lora_box_over_threads(const LoraDelta& delta, const Box& w_box, DType w_dtype, std::span<const std::byte> w,
                                 DType out_dtype, std::span<std::byte> out, int threads);

}  // namespace reshard::pipelines_detail
