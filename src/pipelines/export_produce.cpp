#include "export_produce.h"

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/pipelines/lora_merge.h"
#include "reshard/pipelines/tensor_map_copy.h"

namespace reshard::pipelines_detail {
namespace {

Shape shape_of(const safetensors::TensorSpec& spec) { return safetensors::layout_shape(spec.shape, spec.name); }

size_t box_bytes(DType dtype, const Box& box) {
  return static_cast<size_t>(dtype_byte_size(dtype, static_cast<uint64_t>(box.volume())));
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

}  // namespace

std::vector<std::pair<size_t, Box>> block_sources(const ExportPlan& plan, const ExportTensor& tensor, const Box& box) {
  std::vector<std::pair<size_t, Box>> sources;
  const auto add = [&](const ResolvedTensor& resolved, const Box& part) {
    for (const OutputPiece& piece : output_box_pieces(resolved, part)) sources.emplace_back(piece.source, piece.source_box);
  };
  add(plan.resolved.outputs[tensor.output], box);
  if (tensor.merge) {
    for (const size_t factor : {tensor.merge->a, tensor.merge->b}) {
      const ResolvedTensor& resolved = plan.resolved.outputs[factor];
      add(resolved, Box::whole(shape_of(resolved.out)));
    }
  }
  return sources;
}

void produce_block(const ExportPlan& plan, const ExportTensor& tensor, const Box& box, const ExportInput& input,
                   std::span<std::byte> out) {
  const ResolvedTensor& resolved = plan.resolved.outputs[tensor.output];
  if (!tensor.merge) {
    produce_resolved(plan.resolved, resolved, box, tensor.spec.dtype, input, out);
    return;
  }
  const ExportMerge& merge = *tensor.merge;
  std::vector<std::byte> w(box_bytes(resolved.source_dtype, box));
  produce_resolved(plan.resolved, resolved, box, resolved.source_dtype, input, w);
  const LoraDelta delta{factor_of(plan, merge.a, input), factor_of(plan, merge.b, input), merge.scaling,
                        merge.fan_in_fan_out};
  merge_lora_box(delta, box, resolved.source_dtype, w, tensor.spec.dtype, out);
}

}  // namespace reshard::pipelines_detail
