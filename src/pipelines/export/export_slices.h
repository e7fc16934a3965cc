// Where an export's bytes go when the output is in an object store: each
// block's bytes cut along the parts of its file, and each part's owner, the
// one process that uploads it. Computed identically on every process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipelines/export/export_blocks.h"
#include "pipelines/export/export_objects.h"
#include "pipelines/export/export_plan.h"
#include "reshard/storage/part_layout.h"

namespace reshard::pipelines_detail {

// A block's bytes that fall in one part.
struct BlockSlice {
  size_t file = 0;
  uint32_t part = 0;
  uint64_t offset = 0;        // in the file
  uint64_t length = 0;
  uint64_t block_offset = 0;  // where they start in the block's bytes
  int owner = 0;              // the part's owner
};

struct PartAssignment {
  std::vector<std::vector<BlockSlice>> slices;  // per block, in file order
  std::vector<std::vector<int>> owners;         // per file, per part

  // The parts `process` uploads, per file.
  std::vector<std::vector<uint32_t>> owned_by(int process) const;
  // Slices produced by one process and uploaded by another (each a message).
  size_t moved_slices(const std::vector<ExportBlock>& blocks) const;
};

// Each part goes to the process that produces most of its bytes (ties to the
// lowest rank; a part no block writes, only a header, to part % processes).
PartAssignment assign_parts(const ExportPlan& plan, const OutputFiles& files,
                            const std::vector<storage::PartLayout>& parts, const std::vector<ExportBlock>& blocks,
                            int processes);

}  // namespace reshard::pipelines_detail
