// An export's work, cut into blocks: row ranges of the output tensors of
// bounded bytes, each given to one process, balanced by bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "pipelines/export/export_plan.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/box.h"
#include "reshard/storage/part_layout.h"

namespace reshard::pipelines_detail {

// A box of one output tensor, produced (and written, or sent) by `process`.
struct ExportBlock {
  size_t tensor = 0;  // index into ExportPlan::tensors
  Box box;            // output coordinates: a range of rows, all of the other dimensions
  int process = 0;
  uint64_t bytes = 0;  // in the output dtype
  // The bytes of its file it writes, [clip_begin, clip_end): a block cut along
  // an object's parts writes only its own part's share of the rows it spans.
  uint64_t clip_begin = 0;
  uint64_t clip_end = UINT64_MAX;
};

// Whether `process` can produce `block` (holds the source bytes it needs).
using CanProduce = std::function<bool(int process, const ExportBlock& block)>;

// The tensors' blocks, tensor by tensor in plan order, rows in order: each at
// most `block_bytes` (or one row, when a row is larger). Each goes to the
// process with the fewest bytes so far among those `can_produce` allows;
// `process` is -1 where none can.
std::vector<ExportBlock> cut_blocks(const ExportPlan& plan, uint64_t block_bytes, int processes,
                                    const CanProduce& can_produce);

// The same work cut along the parts of the output files (`files[f]`'s layout,
// uploaded in `parts[f]`): every block lies in one part and is clipped to it,
// and all blocks of a part go to one process (the least loaded that can
// produce them all, else -1), so that each part's bytes are produced where
// they are uploaded. A row that crosses a part boundary is produced by both
// parts' processes, each writing its own side. Blocks come tensor by tensor in
// plan order, rows in order.
std::vector<ExportBlock> cut_blocks_by_parts(const ExportPlan& plan,
                                             const std::vector<std::pair<std::string, safetensors::FileLayout>>& files,
                                             const std::vector<storage::PartLayout>& parts, uint64_t block_bytes,
                                             int processes, const CanProduce& can_produce);

// Gives every block of `tensor` whose process is -1 to the process with the
// fewest bytes so far (for sources brought to one process first); returns it.
int assign_unplaced(std::vector<ExportBlock>& blocks, size_t tensor, int processes);

}  // namespace reshard::pipelines_detail
