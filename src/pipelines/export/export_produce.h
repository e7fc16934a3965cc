// The bytes of one block of an export: its pieces read from the input and
// moved by the map's fused strided copies, with the adapter's changes merged
// in (a LoRA delta, DoRA's rescaling, lora_B's bias).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "pipelines/export/export_input.h"
#include "pipelines/export/export_plan.h"

namespace reshard::pipelines_detail {

// The source boxes `box` of output `tensor` reads (for a merged weight, its
// factors' and magnitudes' too, and all of W where DoRA's norms run down its
// columns): what a process must hold to produce it.
std::vector<std::pair<size_t, Box>> block_sources(const ExportPlan& plan, const ExportTensor& tensor, const Box& box);

// Produces the blocks of one process, in any order.
class BlockProducer {
 public:
  // `threads`: how many threads merge a LoRA weight's block (the rank's share of the host's cores).
  BlockProducer(const ExportPlan& plan, const ExportInput& input, int threads = 1)
      : plan_(plan), input_(input), threads_(threads) {}

  // Writes `box` of `tensor` into `out` (dense row-major, in the tensor's
  // output dtype). A merged weight or bias is produced in the framework's
  // dtype, merged in f32 with the adapter's framework values (for DoRA also
  // scaled by magnitude / ||W + ΔW|| per output feature), rounded back to
  // that dtype once, then cast to the output's.
  void produce(const ExportTensor& tensor, const Box& box, std::span<std::byte> out);

 private:
  void produce_merged_weight(const ExportTensor& tensor, const Box& box, std::span<std::byte> out);
  void produce_merged_bias(const ExportTensor& tensor, const Box& box, std::span<std::byte> out);
  // DoRA's scales where the norms run down W's columns, from a pass over all
  // of W, `rows` rows at a time; kept for the tensor's next blocks.
  const std::vector<float>& column_scales(const ExportTensor& tensor, int64_t rows);

  const ExportPlan& plan_;
  const ExportInput& input_;
  int threads_ = 1;
  std::optional<std::pair<size_t, std::vector<float>>> column_scales_;  // by ExportTensor::output
};

}  // namespace reshard::pipelines_detail
