// Producing merge-lora's merged tensors block by block: a weight with its
// LoRA delta (DoRA's rescaling included) and a bias with lora_B's.
#pragma once

#include <cstddef>

#include "formats/hf_folder_writer.h"
#include "pipelines/common/block_pipeline.h"
#include "pipelines/lora/merge_lora_plan.h"
#include "reshard/formats/tensor_catalog.h"

namespace reshard::pipelines_detail {

// How a weight is merged: blocks of rows of at most about `block_bytes`, each
// merged over `threads` threads, while the next is read and the last written.
struct MergeBlocking {
  size_t block_bytes = size_t{8} << 20;
  int threads = 1;
};

// Streams the merged weight `w` (from `w_catalog`: the base, or the adapter
// when the adapter replaces it) in `out_dtype`, block by block (`blocking`),
// `sink` called in order from one thread at a time (not always the caller's),
// through `buffers` (kept from weight to weight, so blocks are not allocated
// afresh). Per element, in f32: W + scaling * sum_k
// B[i,k] A[k,j] (transposed for fan_in_fan_out), rounded once to W's dtype.
// With DoRA (PEFT's merge): that value times magnitude[o] / ||row o of
// W + ΔW|| for output feature o (a row of W, or a column with
// fan_in_fan_out), the norm summed in f64 from the f32 values and rounded to
// f32, the factor an f32 division; a first pass over the blocks computes the
// norms, so memory stays a few blocks.
void produce_merged_weight(const TensorCatalog& w_catalog, const TensorCatalog::Entry& w,
                           const TensorCatalog& adapter, const MergeModule& module, DType out_dtype,
                           const MergeBlocking& blocking, BlockBuffers& buffers, const ByteSink& sink);

// Streams the bias `bias` plus scaling * lora_B.bias, in f32, rounded once to
// the bias's dtype, then written as `out_dtype`.
void produce_merged_bias(const TensorCatalog& catalog, const TensorCatalog::Entry& bias, const TensorCatalog& adapter,
                         const MergeModule& module, DType out_dtype, const ByteSink& sink);

}  // namespace reshard::pipelines_detail
