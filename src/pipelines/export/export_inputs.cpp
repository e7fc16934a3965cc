#include "pipelines/export/export_inputs.h"

#include <optional>

#include <fmt/format.h>

#include "pipelines/tensor_map/strided_copy.h"
#include "reshard/execute/operations.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {
namespace {


// Copies the part `part` of a dense buffer over `held` into the dense buffer over `box`.
void copy_part(const Box& held, std::span<const std::byte> held_bytes, const Box& box, const Box& part, DType dtype,
               std::span<std::byte> out) {
  StridedCopy copy;
  copy.shape = part.shape();
  copy.src_strides = row_major_strides(held.shape());
  copy.dst_strides = row_major_strides(box.shape());
  for (size_t d = 0; d < part.rank(); ++d) {
    copy.src_offset += (part.origin()[d] - held.origin()[d]) * copy.src_strides[d];
    copy.dst_offset += (part.origin()[d] - box.origin()[d]) * copy.dst_strides[d];
  }
  copy.src_dtype = dtype;
  copy.dst_dtype = dtype;
  run_strided_copy(copy, held_bytes.data(), out.data());
}

size_t box_bytes(DType dtype, const Box& box) {
  return static_cast<size_t>(dtype_byte_size(dtype, static_cast<uint64_t>(box.volume())));
}

// Where `part` (inside `box`) lies in the dense buffer over `box`, in
// elements, when its elements form one contiguous run there: it spans the
// box's trailing dimensions whole, after dimensions of size 1.
std::optional<int64_t> contiguous_offset(const Box& box, const Box& part) {
  size_t first = 0;
  while (first < part.rank() && part.shape()[first] == 1) ++first;
  for (size_t d = first + 1; d < part.rank(); ++d) {
    if (part.shape()[d] != box.shape()[d]) return std::nullopt;
  }
  const std::vector<int64_t> strides = row_major_strides(box.shape());
  int64_t offset = 0;
  for (size_t d = 0; d < part.rank(); ++d) offset += (part.origin()[d] - box.origin()[d]) * strides[d];
  return offset;
}

}  // namespace

CheckpointInput::CheckpointInput(checkpoint::Reader reader) : reader_(std::move(reader)) {
  for (const checkpoint::TensorEntry& tensor : reader_.manifest().tensors) {
    std::vector<uint64_t> dims;
    for (const int64_t d : tensor.shape) dims.push_back(static_cast<uint64_t>(d));
    specs_.push_back({tensor.name, tensor.dtype, dims});
  }
}

void CheckpointInput::read(size_t source, const Box& box, std::span<std::byte> out) const {
  const checkpoint::TensorEntry& tensor = reader_.manifest().tensors.at(source);
  std::vector<std::byte> part_bytes;
  for (size_t c = 0; c < tensor.chunks.size(); ++c) {
    const Box& chunk = tensor.chunks[c].box;
    if (chunk.contains(box)) {
      reader_.read_chunk_part(tensor, c, box, out);
      return;
    }
    const Box part = chunk.intersect(box);
    if (part.empty()) continue;
    if (const std::optional<int64_t> offset = contiguous_offset(box, part)) {  // read in place
      const size_t at = static_cast<size_t>(dtype_byte_size(tensor.dtype, static_cast<uint64_t>(*offset)));
      reader_.read_chunk_part(tensor, c, part, out.subspan(at, box_bytes(tensor.dtype, part)));
      continue;
    }
    part_bytes.resize(box_bytes(tensor.dtype, part));
    reader_.read_chunk_part(tensor, c, part, part_bytes);
    copy_part(part, part_bytes, box, part, tensor.dtype, out);
  }
}

ArraysInput::ArraysInput(std::span<const NamedArray> arrays, int rank) : arrays_(arrays), rank_(rank) {
  for (const NamedArray& named : arrays) {
    const ShardedArray& array = named.array;
    std::vector<uint64_t> dims;
    for (const int64_t d : array.shape()) dims.push_back(static_cast<uint64_t>(d));
    specs_.push_back({named.name, array.dtype(), dims});
    std::vector<std::vector<Box>> by_process(static_cast<size_t>(array.topology().num_processes()));
    for (int p = 0; p < array.topology().num_processes(); ++p) {
      for (const auto& [device, box] : array.sharding().addressable_index_map(array.shape(), array.topology(), p)) {
        by_process[static_cast<size_t>(p)].push_back(box);
      }
    }
    boxes_.push_back(std::move(by_process));
  }
}

bool ArraysInput::readable_by(int process, size_t source, const Box& box) const {
  if (const auto whole = whole_.find(source); whole != whole_.end() && whole->second.first == process) return true;
  for (const Box& held : boxes_.at(source).at(static_cast<size_t>(process))) {
    if (held.contains(box)) return true;
  }
  return false;
}

void ArraysInput::read(size_t source, const Box& box, std::span<std::byte> out) const {
  const ShardedArray& array = arrays_[source].array;
  if (const auto whole = whole_.find(source); whole != whole_.end() && whole->second.second) {
    copy_part(Box::whole(array.shape()), whole->second.second->buffer.bytes(), box, box, array.dtype(), out);
    return;
  }
  for (const Shard& shard : array.shards()) {
    if (shard.box.contains(box)) {
      copy_part(shard.box, shard.buffer.bytes(), box, box, array.dtype(), out);
      return;
    }
  }
  throw Error(ErrorCode::kInvalidArgument, fmt::format("tensor '{}': process {} holds no shard containing {}",
                                                       arrays_[source].name, rank_, box.to_string()));
}

void ArraysInput::bring_whole(size_t source, int root, Transport& transport) {
  std::optional<HostArray> host = to_host(arrays_[source].array, transport, root);
  whole_[source] = {root, std::move(host)};
}

void ArraysInput::release(size_t source) { whole_.erase(source); }

SourceInput::SourceInput(const TensorSource& source) : source_(source) {
  if (!source_.read) throw Error(ErrorCode::kInvalidArgument, "tensor source: no read function");
}

void SourceInput::read(size_t source, const Box& box, std::span<std::byte> out) const {
  const safetensors::TensorSpec& spec = source_.specs.at(source);
  const std::string where = fmt::format("reading tensor '{}' {}", spec.name, box.to_string());
  try {
    source_.read(source, box, out);
  } catch (const Error& e) {
    throw e.with_context(where);
  } catch (const std::exception& e) {
    // Not reshard's own: typed as a failed read, its text kept.
    throw Error(ErrorCode::kIo, fmt::format("{}: {}", where, e.what()));
  }
}

}  // namespace reshard::pipelines_detail
