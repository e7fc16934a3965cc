#include "pipelines/export/export_slices.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "layout/checked.h"

namespace reshard::pipelines_detail {

using layout_detail::checked_add;
using layout_detail::checked_mul;

namespace {

// A tensor's place in the output: its file and its bytes there.
struct Placed {
  size_t file = 0;
  uint64_t begin = 0;
  uint64_t row_bytes = 0;
};

std::vector<Placed> place_tensors(const ExportPlan& plan, const OutputFiles& files) {
  std::unordered_map<std::string_view, Placed> by_name;
  for (size_t f = 0; f < files.size(); ++f) {
    const safetensors::Header& header = files[f].second.header();
    for (const safetensors::TensorInfo& info : header.tensors()) {
      const uint64_t rows = info.shape.empty() || info.shape[0] == 0 ? 1 : info.shape[0];
      by_name.emplace(info.name, Placed{f, header.file_offset(info), info.byte_size() / rows});
    }
  }
  std::vector<Placed> placed;
  for (const ExportTensor& tensor : plan.tensors) placed.push_back(by_name.at(tensor.spec.name));
  return placed;
}

}  // namespace

std::vector<std::vector<uint32_t>> PartAssignment::owned_by(int process) const {
  std::vector<std::vector<uint32_t>> owned(owners.size());
  for (size_t f = 0; f < owners.size(); ++f) {
    for (uint32_t part = 0; part < owners[f].size(); ++part) {
      if (owners[f][part] == process) owned[f].push_back(part);
    }
  }
  return owned;
}

size_t PartAssignment::moved_slices(const std::vector<ExportBlock>& blocks) const {
  size_t moved = 0;
  for (size_t b = 0; b < blocks.size(); ++b) {
    for (const BlockSlice& slice : slices[b]) moved += slice.owner != blocks[b].process ? size_t{1} : size_t{0};
  }
  return moved;
}

PartAssignment assign_parts(const ExportPlan& plan, const OutputFiles& files,
                            const std::vector<storage::PartLayout>& parts, const std::vector<ExportBlock>& blocks,
                            int processes) {
  const std::vector<Placed> placed = place_tensors(plan, files);
  PartAssignment assignment;
  assignment.slices.resize(blocks.size());
  // Bytes each process produces into each part.
  std::vector<std::vector<std::vector<uint64_t>>> produced(files.size());
  for (size_t f = 0; f < files.size(); ++f) {
    produced[f].assign(parts[f].count(), std::vector<uint64_t>(static_cast<size_t>(processes), 0));
  }
  for (size_t b = 0; b < blocks.size(); ++b) {
    const ExportBlock& block = blocks[b];
    const Placed& where = placed[block.tensor];
    const uint64_t first_row = block.box.origin().empty() ? 0 : static_cast<uint64_t>(block.box.origin()[0]);
    const uint64_t start = checked_add(where.begin, checked_mul(first_row, where.row_bytes, "a block's offset"),
                                       "a block's offset");
    const uint64_t begin = std::max(start, block.clip_begin);
    const uint64_t end = std::min(start + block.bytes, block.clip_end);
    for (uint64_t at = begin; at < end;) {
      const uint32_t part = parts[where.file].part_of(at);
      const uint64_t part_end = parts[where.file].offset(part) + parts[where.file].size(part);
      const uint64_t length = std::min(end, part_end) - at;
      assignment.slices[b].push_back(BlockSlice{where.file, part, at, length, at - start, 0});
      if (block.process >= 0) produced[where.file][part][static_cast<size_t>(block.process)] += length;
      at += length;
    }
  }
  assignment.owners.resize(files.size());
  for (size_t f = 0; f < files.size(); ++f) {
    for (uint32_t part = 0; part < parts[f].count(); ++part) {
      const std::vector<uint64_t>& bytes = produced[f][part];
      const auto most = std::max_element(bytes.begin(), bytes.end());
      const int owner = *most > 0 ? static_cast<int>(most - bytes.begin()) : static_cast<int>(part % static_cast<uint32_t>(processes));
      assignment.owners[f].push_back(owner);
    }
  }
  for (auto& block_slices : assignment.slices) {
    for (BlockSlice& slice : block_slices) slice.owner = assignment.owners[slice.file][slice.part];
  }
  return assignment;
}

}  // namespace reshard::pipelines_detail
