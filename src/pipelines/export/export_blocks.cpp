#include "pipelines/export/export_blocks.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "layout/checked.h"

namespace reshard::pipelines_detail {

using layout_detail::checked_mul;

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

namespace {

// One tensor's rows in bytes: the tensor's place in its file and its row size.
struct TensorRows {
  size_t tensor = 0;     // index into ExportPlan::tensors
  uint64_t begin = 0;    // file offset of its first byte
  uint64_t bytes = 0;    // all its bytes
  int64_t rows = 1;      // rows (1 for a scalar)
  uint64_t row_bytes = 0;
  Shape shape;
};

std::vector<TensorRows> rows_of_file(const ExportPlan& plan, const safetensors::FileLayout& layout) {
  std::unordered_map<std::string_view, size_t> index;
  for (size_t t = 0; t < plan.tensors.size(); ++t) index.emplace(plan.tensors[t].spec.name, t);
  std::vector<TensorRows> out;
  for (const safetensors::TensorInfo& info : layout.header().tensors()) {
    TensorRows rows;
    rows.tensor = index.at(info.name);
    rows.begin = layout.header().file_offset(info);
    rows.bytes = info.byte_size();
    rows.shape = safetensors::layout_shape(plan.tensors[rows.tensor].spec.shape, info.name);
    rows.rows = rows.shape.empty() ? 1 : rows.shape[0];
    if (rows.bytes == 0 || rows.rows == 0) continue;  // no bytes to write
    rows.row_bytes = rows.bytes / static_cast<uint64_t>(rows.rows);
    out.push_back(std::move(rows));
  }
  return out;
}

// Blocks of at most `block_bytes` covering rows [first, last) of `rows`, clipped to [begin, end).
void add_row_blocks(const TensorRows& rows, int64_t first, int64_t last, uint64_t begin, uint64_t end,
                    uint64_t block_bytes, std::vector<ExportBlock>& out) {
  const int64_t per_block = std::max<int64_t>(
      1, static_cast<int64_t>(std::min<uint64_t>(block_bytes / std::max<uint64_t>(rows.row_bytes, 1), uint64_t{1} << 62)));
  for (int64_t row = first; row < last; row += per_block) {
    ExportBlock block;
    block.tensor = rows.tensor;
    const int64_t count = std::min(per_block, last - row);
    if (rows.shape.empty()) {
      block.box = Box::whole(rows.shape);
    } else {
      std::vector<int64_t> origin(rows.shape.size(), 0);
      Shape extent = rows.shape;
      origin[0] = row;
      extent[0] = count;
      block.box = Box(origin, extent);
    }
    block.bytes = checked_mul(rows.row_bytes, static_cast<uint64_t>(count), "block size");
    block.clip_begin = begin;
    block.clip_end = end;
    block.process = -1;
    out.push_back(std::move(block));
  }
}

}  // namespace

std::vector<ExportBlock> cut_blocks_by_parts(const ExportPlan& plan,
                                             const std::vector<std::pair<std::string, safetensors::FileLayout>>& files,
                                             const std::vector<storage::PartLayout>& parts, uint64_t block_bytes,
                                             int processes, const CanProduce& can_produce) {
  std::vector<ExportBlock> blocks;
  std::vector<uint64_t> load(static_cast<size_t>(processes), 0);
  for (size_t f = 0; f < files.size(); ++f) {
    const std::vector<TensorRows> tensors = rows_of_file(plan, files[f].second);
    for (uint32_t part = 0; part < parts[f].count(); ++part) {
      const uint64_t begin = parts[f].offset(part);
      const uint64_t end = begin + parts[f].size(part);
      const size_t first_block = blocks.size();
      for (const TensorRows& rows : tensors) {
        const uint64_t from = std::max(begin, rows.begin);
        const uint64_t to = std::min(end, rows.begin + rows.bytes);
        if (from >= to) continue;
        const auto first_row = static_cast<int64_t>((from - rows.begin) / rows.row_bytes);
        const auto last_row = static_cast<int64_t>((to - rows.begin + rows.row_bytes - 1) / rows.row_bytes);
        add_row_blocks(rows, first_row, last_row, begin, end, block_bytes, blocks);
      }
      // The part's blocks go together to the least loaded process that can produce them all.
      uint64_t part_bytes = 0;
      for (size_t b = first_block; b < blocks.size(); ++b) part_bytes += blocks[b].bytes;
      int chosen = -1;
      for (int p = 0; p < processes; ++p) {
        if (chosen >= 0 && load[static_cast<size_t>(p)] >= load[static_cast<size_t>(chosen)]) continue;
        bool all = true;
        for (size_t b = first_block; all && b < blocks.size(); ++b) all = can_produce(p, blocks[b]);
        if (all) chosen = p;
      }
      if (chosen >= 0) load[static_cast<size_t>(chosen)] += part_bytes;
      for (size_t b = first_block; b < blocks.size(); ++b) blocks[b].process = chosen;
    }
  }
  std::stable_sort(blocks.begin(), blocks.end(), [](const ExportBlock& a, const ExportBlock& b) {
    if (a.tensor != b.tensor) return a.tensor < b.tensor;
    return a.box.origin().empty() ? false : a.box.origin()[0] < b.box.origin()[0];
  });
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
