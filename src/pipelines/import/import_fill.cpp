#include "pipelines/import/import_fill.h"

#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "layout/checked.h"
#include "pipelines/tensor_map/tensor_map_copy.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

using layout_detail::checked_add;
using layout_detail::checked_mul;

namespace {

// The source bytes the copies making `box` read: each piece's walk touches
// exactly its own elements (a piece's source box may be wider, when a merged
// axis is cut mid-way, so it is not what is counted).
uint64_t source_bytes_read(const ImportPlan& plan, const ResolvedTensor& tensor, const Box& box) {
  uint64_t total = 0;
  for (const OutputPiece& piece : output_box_pieces(tensor, box)) {
    uint64_t elements = 1;
    for (const int64_t n : piece.shape) elements = checked_mul(elements, static_cast<uint64_t>(n), "piece size");
    total = checked_add(total, dtype_byte_size(plan.map.sources[piece.source].dtype, elements), "bytes read");
  }
  return total;
}

}  // namespace

ShardedArray fill_import_tensor(const ImportPlan& plan, size_t output, const ImportSource& source,
                                const Topology& topology, int process, FillStats& stats,
                                const std::function<void(uint64_t)>& progress) {
  const ResolvedTensor& tensor = plan.map.outputs[output];
  const Shape shape = safetensors::layout_shape(tensor.out);
  ShardedArray array = ShardedArray::allocate(shape, tensor.out.dtype, plan.shardings[output], topology, process);
  // Mapped files are copied from in place; objects are read piece by piece.
  const SourceBytes bytes = [&source](size_t s) { return source.bytes(s); };
  const SourceBoxReader read = [&source](size_t s, const Box& box, std::span<std::byte> out) {
    source.read_box(s, box, out);
  };
  // Slices already built, by box: a replica on another device is a copy of it.
  std::map<std::pair<std::vector<int64_t>, Shape>, size_t> built;
  for (size_t i = 0; i < array.shards().size(); ++i) {
    const Shard& shard = array.shards()[i];
    if (shard.box.empty()) continue;
    const auto [it, inserted] = built.try_emplace({shard.box.origin(), shard.box.shape()}, i);
    if (!inserted) {
      std::memcpy(array.writable_bytes(i).data(), array.shards()[it->second].buffer.data(), shard.buffer.size());
      continue;
    }
    try {
      if (source.has_views()) {
        copy_output_box(plan.map, tensor, shard.box, bytes, array.writable_bytes(i));
      } else {
        copy_output_box_from_reads(plan.map, tensor, shard.box, read, array.writable_bytes(i));
      }
      stats.bytes_read = checked_add(stats.bytes_read, source_bytes_read(plan, tensor, shard.box), "bytes read");
    } catch (const Error& e) {
      throw e.with_context(fmt::format("tensor '{}' slice {}", tensor.out.name, shard.box.to_string()));
    }
    stats.bytes_made = checked_add(stats.bytes_made, shard.buffer.size(), "bytes made");
    if (progress) progress(shard.buffer.size());
  }
  return array;
}

}  // namespace reshard::pipelines_detail
