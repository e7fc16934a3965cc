// The bytes of one block of an export: its pieces read from the input and
// moved by the map's fused strided copies, with the LoRA delta merged in.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "export_input.h"
#include "export_plan.h"

namespace reshard::pipelines_detail {

// The source boxes `box` of output `tensor` reads (for a merged weight, its
// factors' too): what a process must hold to produce it.
std::vector<std::pair<size_t, Box>> block_sources(const ExportPlan& plan, const ExportTensor& tensor, const Box& box);

// Writes `box` of `tensor` into `out` (dense row-major, in the tensor's
// output dtype). A merged weight is produced in the framework's dtype,
// merged in f32 with its factors' framework values, rounded back to that
// dtype, then cast to the output's.
void produce_block(const ExportPlan& plan, const ExportTensor& tensor, const Box& box, const ExportInput& input,
                   std::span<std::byte> out);

}  // namespace reshard::pipelines_detail
