#include "pipelines/export/export_blocks.h"

#include <algorithm>

#include "layout/checked.h"

namespace reshard::pipelines_detail {
namespace {

// Bytes given to each process so far.
std::vector<uint64_t> loads(const std::vector<ExportBlock>& blocks, int processes) {
  std::vector<uint64_t> load(static_cast<size_t>(processes), 0);
  for (const ExportBlock& block : blocks) {
    if (block.process >= 0) load[static_cast<size_t>(block.process)] += block.bytes;
  }
  return load;
}

}  // namespace

std::vector<ExportBlock> cut_blocks(const ExportPlan& plan, uint64_t block_bytes, int processes,
                                    const CanProduce& can_produce) {
  std::vector<ExportBlock> blocks;
  std::vector<uint64_t> load(static_cast<size_t>(processes), 0);
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    const safetensors::TensorSpec& spec = plan.tensors[t].spec;
    const Shape shape = safetensors::layout_shape(spec.shape, spec.name);
    const Box whole = Box::whole(shape);
    if (whole.empty() && !shape.empty()) continue;  // no bytes to write
    const uint64_t total = dtype_byte_size(spec.dtype, static_cast<uint64_t>(whole.volume()));
    const int64_t rows = shape.empty() ? 1 : shape[0];
    const uint64_t row_bytes = total / static_cast<uint64_t>(rows);
    const int64_t per_block = std::max<int64_t>(1, static_cast<int64_t>(std::min<uint64_t>(
                                                       block_bytes / std::max<uint64_t>(row_bytes, 1), uint64_t{1} << 62)));
    for (int64_t row = 0; row < rows; row += per_block) {
      ExportBlock block;
      block.tensor = t;
      if (shape.empty()) {
        block.box = whole;
      } else {
        std::vector<int64_t> origin(shape.size(), 0);
        Shape extent = shape;
        origin[0] = row;
        extent[0] = std::min(per_block, rows - row);
        block.box = Box(origin, extent);
      }
      block.bytes = checked_mul(row_bytes, static_cast<uint64_t>(shape.empty() ? 1 : block.box.shape()[0]), "block size");
      block.process = -1;
      for (int p = 0; p < processes; ++p) {
        if ((block.process < 0 || load[static_cast<size_t>(p)] < load[static_cast<size_t>(block.process)]) &&
            can_produce(p, block)) {
          block.process = p;
        }
      }
      if (block.process >= 0) load[static_cast<size_t>(block.process)] += block.bytes;
      blocks.push_back(std::move(block));
    }
  }
  return blocks;
}

int assign_unplaced(std::vector<ExportBlock>& blocks, size_t tensor, int processes) {
  const std::vector<uint64_t> load = loads(blocks, processes);
  const int least = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
  for (ExportBlock& block : blocks) {
    if (block.tensor == tensor && block.process < 0) block.process = least;
  }
  return least;
}

}  // namespace reshard::pipelines_detail
