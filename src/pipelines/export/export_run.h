// Running a planned export over the job: every process produces its blocks
// and writes them at their final offsets (or sends them to the one process
// that writes), then they agree, and one commits.
#pragma once

#include <filesystem>
#include <functional>
#include <vector>

#include "pipelines/export/export_blocks.h"
#include "pipelines/export/export_input.h"
#include "pipelines/export/export_plan.h"
#include "reshard/execute/transport.h"
#include "reshard/pipelines/export_model.h"

namespace reshard::pipelines_detail {

// Collective steps around each output tensor (arrays brought to one process
// before, released after); every process calls them in tensor order.
struct ExportSteps {
  std::function<void(size_t tensor)> before;
  std::function<void(size_t tensor)> after;
};

// Collective. `blocks` as cut_blocks gives them (every block placed), in
// tensor order. A failure on any process fails the export on every process
// and leaves `out` as it was.
ExportResult run_export(const ExportPlan& plan, const std::vector<ExportBlock>& blocks, const ExportInput& input,
                        const storage::Location& out, const ExportOptions& options, Transport& transport,
                        const ExportSteps& steps = {});

}  // namespace reshard::pipelines_detail
