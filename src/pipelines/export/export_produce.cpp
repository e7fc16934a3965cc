#include "pipelines/export/export_produce.h"

#include <algorithm>

#include <fmt/format.h>

#include "pipelines/lora/merge_box.h"
#include "pipelines/lora/dora_and_rounding.h"
#include "pipelines/tensor_map/tensor_map_copy.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {
namespace {

Shape shape_of(const safetensors::TensorSpec& spec) { return safetensors::layout_shape(spec.shape, spec.name); }

size_t box_bytes(DType dtype, const Box& box) {
  return static_cast<size_t>(dtype_byte_size(dtype, static_cast<uint64_t>(box.volume())));
}

// Whether a piece's copy is the whole output box, element by element in
// order and in the same dtype (an unstacked layer, a merge of whole axes).
bool is_plain_copy(const OutputPiece& piece, DType src_dtype, DType dst_dtype, const Box& box) {
  if (src_dtype != dst_dtype || piece.source_box.volume() != box.volume()) return false;
  const StridedCopy copy = piece.copy_from(piece.source_box, src_dtype, dst_dtype);
  return copy.src_offset == 0 && copy.dst_offset == 0 && copy.src_strides == copy.dst_strides &&
         copy.dst_strides == row_major_strides(copy.shape);
}

// `box` of a resolved output, as `dtype`, each piece read from the input
// (only its source box) and copied into place.
void produce_resolved(const ResolvedMap& resolved, const ResolvedTensor& tensor, const Box& box, DType dtype,
                      const ExportInput& input, std::span<std::byte> out) {
  if (out.size() != box_bytes(dtype, box)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("tensor '{}' {}: the buffer has {} bytes", tensor.out.name,
                                                         box.to_string(), out.size()));
  }
  std::vector<std::byte> held;
  for (const OutputPiece& piece : output_box_pieces(tensor, box)) {
    const DType src_dtype = resolved.sources[piece.source].dtype;
    if (is_plain_copy(piece, src_dtype, dtype, box)) {  // the source box is the block's bytes: read them in place
      input.read(piece.source, piece.source_box, out);
      continue;
    }
    held.resize(box_bytes(src_dtype, piece.source_box));
    input.read(piece.source, piece.source_box, held);
    run_strided_copy(piece.copy_from(piece.source_box, src_dtype, dtype), held.data(), out.data());
  }
}

LoraFactor factor_of(const ExportPlan& plan, size_t output, const ExportInput& input) {
  const ResolvedTensor& tensor = plan.resolved.outputs[output];
  LoraFactor factor;
  factor.dtype = tensor.source_dtype;
  factor.shape = shape_of(tensor.out);
  factor.read = [&plan, &tensor, &input](const Box& box, std::span<std::byte> out) {
    produce_resolved(plan.resolved, tensor, box, tensor.source_dtype, input, out);
  };
  return factor;
}

// `box` of output `output` as f32 values.
std::vector<float> produce_f32(const ExportPlan& plan, size_t output, const Box& box, const ExportInput& input) {
  std::vector<float> values(static_cast<size_t>(box.volume()));
  produce_resolved(plan.resolved, plan.resolved.outputs[output], box, DType::kF32, input,
                   std::as_writable_bytes(std::span(values)));
  return values;
}

// Rows [row, row + rows) of a 2-D tensor of `shape`.
Box row_box(const Shape& shape, int64_t row, int64_t rows) { return Box({row, 0}, {rows, shape[1]}); }

LoraDelta delta_of(const ExportPlan& plan, const ExportMerge& merge, const ExportInput& input) {
  return {factor_of(plan, merge.a, input), factor_of(plan, merge.b, input), merge.scaling, merge.fan_in_fan_out};
}

// `box` of W + ΔW in f32, unrounded (what DoRA's norms are taken of).
std::vector<float> merged_f32(const ExportPlan& plan, const ExportTensor& tensor, const Box& box,
                              const ExportInput& input) {
  const std::vector<float> w = produce_f32(plan, tensor.output, box, input);
  std::vector<float> merged(w.size());
  merge_lora_box(delta_of(plan, *tensor.merge, input), box, DType::kF32, std::as_bytes(std::span(w)), DType::kF32,
                 std::as_writable_bytes(std::span(merged)));
  return merged;
}

}  // namespace

std::vector<std::pair<size_t, Box>> block_sources(const ExportPlan& plan, const ExportTensor& tensor, const Box& box) {
  std::vector<std::pair<size_t, Box>> sources;
  const auto add = [&](size_t output, const std::optional<Box>& part) {
    const ResolvedTensor& resolved = plan.resolved.outputs[output];
    const Box read = part ? *part : Box::whole(shape_of(resolved.out));
    for (const OutputPiece& piece : output_box_pieces(resolved, read)) sources.emplace_back(piece.source, piece.source_box);
  };
  const bool whole_weight = tensor.merge && tensor.merge->needs_whole_weight();
  add(tensor.output, whole_weight ? std::nullopt : std::optional<Box>(box));
  if (tensor.merge) {
    add(tensor.merge->a, std::nullopt);
    add(tensor.merge->b, std::nullopt);
    if (tensor.merge->magnitude) add(*tensor.merge->magnitude, std::nullopt);
  }
  if (tensor.bias) add(tensor.bias->lora_bias, box);
  return sources;
}

void BlockProducer::produce(const ExportTensor& tensor, const Box& box, std::span<std::byte> out) {
  if (out.size() != box_bytes(tensor.spec.dtype, box)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("tensor '{}' {}: the buffer has {} bytes", tensor.spec.name,
                                                         box.to_string(), out.size()));
  }
  if (tensor.merge) {
    produce_merged_weight(tensor, box, out);
  } else if (tensor.bias) {
    produce_merged_bias(tensor, box, out);
  } else {
    produce_resolved(plan_.resolved, plan_.resolved.outputs[tensor.output], box, tensor.spec.dtype, input_, out);
  }
}

void BlockProducer::produce_merged_weight(const ExportTensor& tensor, const Box& box, std::span<std::byte> out) {
  const ResolvedTensor& w = plan_.resolved.outputs[tensor.output];
  const ExportMerge& merge = *tensor.merge;
  if (!merge.magnitude) {  // plain LoRA: merged and rounded in one pass over the box
    std::vector<std::byte> values(box_bytes(w.source_dtype, box));
    produce_resolved(plan_.resolved, w, box, w.source_dtype, input_, values);
    merge_lora_box_over_threads(delta_of(plan_, merge, input_), box, w.source_dtype, values, tensor.spec.dtype, out,
                                threads_);
    return;
  }
  // A block holds whole rows: DoRA's row norms (W [out, in]) come from the
  // block itself; column norms (W [in, out]) from a pass over all of W.
  std::vector<float> merged = merged_f32(plan_, tensor, box, input_);
  const int64_t rows = box.shape()[0], cols = box.shape()[1];
  if (merge.fan_in_fan_out) {
    apply_scales({merged, box.origin()[0], rows, cols}, true, column_scales(tensor, rows));
  } else {
    std::vector<double> squares(static_cast<size_t>(rows), 0.0);
    add_squares({merged, 0, rows, cols}, false, squares);
    const std::vector<float> magnitude = produce_f32(plan_, *merge.magnitude, Box({box.origin()[0]}, {rows}), input_);
    apply_scales({merged, 0, rows, cols}, false, dora_scales(magnitude, squares));
  }
  round_and_cast(merged, w.source_dtype, tensor.spec.dtype, out);
}

const std::vector<float>& BlockProducer::column_scales(const ExportTensor& tensor, int64_t rows) {
  if (column_scales_ && column_scales_->first == tensor.output) return column_scales_->second;
  const Shape shape = shape_of(plan_.resolved.outputs[tensor.output].out);
  std::vector<double> squares(static_cast<size_t>(shape[1]), 0.0);
  for (int64_t row = 0; row < shape[0]; row += rows) {
    const int64_t count = std::min(rows, shape[0] - row);
    std::vector<float> merged = merged_f32(plan_, tensor, row_box(shape, row, count), input_);
    add_squares({merged, row, count, shape[1]}, true, squares);
  }
  const std::vector<float> magnitude =
      produce_f32(plan_, *tensor.merge->magnitude, Box::whole({shape[1]}), input_);
  column_scales_.emplace(tensor.output, dora_scales(magnitude, squares));
  return column_scales_->second;
}

void BlockProducer::produce_merged_bias(const ExportTensor& tensor, const Box& box, std::span<std::byte> out) {
  std::vector<float> values = produce_f32(plan_, tensor.output, box, input_);
  const std::vector<float> lora = produce_f32(plan_, tensor.bias->lora_bias, box, input_);
  add_lora_bias(values, lora, tensor.bias->scaling);
  round_and_cast(values, plan_.resolved.outputs[tensor.output].source_dtype, tensor.spec.dtype, out);
}

}  // namespace reshard::pipelines_detail
