#include "reshard/pipelines/checkpoint_restore.h"

#include <map>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "formats/json_escape.h"
#include "layout/box_copy.h"
#include "pipelines/common/agreement.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/layout/error.h"

namespace reshard {

using formats_detail::json_quoted;
using layout_detail::BoxCopy;

namespace {

namespace detail = pipelines_detail;

// Where a shard's bytes go: its box, and its buffer's writable bytes.
struct ShardTarget {
  Box box;
  std::byte* bytes = nullptr;
};

// The distinct slices this process's devices need, each with its shards.
struct NeededSlice {
  Box box;
  std::vector<ShardTarget> shards;
};

std::vector<NeededSlice> needed_slices(ShardedArray& array) {
  std::vector<NeededSlice> slices;
  std::map<std::pair<std::vector<int64_t>, Shape>, size_t> index;
  for (size_t i = 0; i < array.shards().size(); ++i) {
    const Box& box = array.shards()[i].box;
    if (box.empty()) continue;
    const auto [it, inserted] = index.try_emplace({box.origin(), box.shape()}, slices.size());
    if (inserted) slices.push_back({box, {}});
    slices[it->second].shards.push_back({box, array.writable_bytes(i).data()});
  }
  return slices;
}

void check_matches(const checkpoint::TensorEntry& tensor, const ShardedArray& array) {
  if (tensor.dtype != array.dtype() || tensor.shape != array.shape()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("tensor {} is saved as {} {}, the array to restore it into is {} {}",
                            json_quoted(tensor.name), dtype_name(tensor.dtype), Box::whole(tensor.shape).to_string(),
                            dtype_name(array.dtype()), Box::whole(array.shape()).to_string()));
  }
}

// Copies `common` (inside `from_box`, whose bytes are `from`) into every shard of the slice.
void copy_to_shards(const NeededSlice& slice, const Box& common, const Box& from_box, const std::byte* from,
                    size_t element_bytes) {
  for (const ShardTarget& shard : slice.shards) {
    BoxCopy(common, from_box, shard.box, element_bytes).copy(from, shard.bytes);
  }
}

// For each chunk that any needed slice meets, the checksum blocks holding a
// byte of any of those slices are read once and verified before any of the
// chunk is copied out.
void restore_verified(const checkpoint::Reader& reader, const checkpoint::TensorEntry& tensor,
                      const std::vector<NeededSlice>& slices, size_t element_bytes) {
  for (size_t c = 0; c < tensor.chunks.size(); ++c) {
    const Box& chunk_box = tensor.chunks[c].box;
    std::vector<Box> parts;
    for (const NeededSlice& slice : slices) {
      Box common = slice.box.intersect(chunk_box);
      if (!common.empty()) parts.push_back(std::move(common));
    }
    if (parts.empty()) continue;
    // Uninitialised: only the blocks read are touched.
    const auto length = static_cast<size_t>(tensor.chunks[c].length);
    const std::unique_ptr<std::byte[]> bytes(new std::byte[length]);
    reader.read_chunk_blocks(tensor, c, parts, std::span(bytes.get(), length));
    for (const NeededSlice& slice : slices) {
      const Box common = slice.box.intersect(chunk_box);
      if (!common.empty()) copy_to_shards(slice, common, chunk_box, bytes.get(), element_bytes);
    }
  }
}

// Only the bytes of each slice, read once per slice.
void restore_unverified(const checkpoint::Reader& reader, const checkpoint::TensorEntry& tensor,
                        const std::vector<NeededSlice>& slices, size_t element_bytes) {
  std::vector<std::byte> bytes;
  for (const NeededSlice& slice : slices) {
    for (size_t c = 0; c < tensor.chunks.size(); ++c) {
      const Box common = slice.box.intersect(tensor.chunks[c].box);
      if (common.empty()) continue;
      bytes.resize(static_cast<size_t>(checkpoint::dense_bytes(tensor.dtype, common.shape())));
      reader.read_chunk_part(tensor, c, common, bytes);
      copy_to_shards(slice, common, common, bytes.data(), element_bytes);
    }
  }
}

void restore_arrays(const checkpoint::Reader& reader, std::span<NamedArray> arrays, const RestoreOptions& options) {
  for (NamedArray& named : arrays) {
    const checkpoint::TensorEntry& tensor = reader.tensor(named.name);
    check_matches(tensor, named.array);
    const std::vector<NeededSlice> slices = needed_slices(named.array);
    if (options.verify_checksums) {
      restore_verified(reader, tensor, slices, named.array.element_bytes());
    } else {
      restore_unverified(reader, tensor, slices, named.array.element_bytes());
    }
    named.metadata = tensor.metadata;
  }
}

// Runs `body` on the opened checkpoint, then agrees with the peers that every
// process succeeded; returns what this process read.
RestoreResult run_collectively(const storage::Location& path, Transport& transport,
                               const std::function<void(const checkpoint::Reader&)>& body) {
  detail::Failure failure;
  std::optional<checkpoint::Reader> reader;
  detail::run_step(failure, [&] {
    reader.emplace(checkpoint::Reader::open(path));
    body(*reader);
  });
  RestoreResult result;
  if (reader) {
    const checkpoint::ReadCounters counters = reader->counters();
    result.header_bytes_read = counters.header_bytes;
    result.data_bytes_read = counters.data_bytes;
  }
  const auto reports = detail::exchange_reports(transport, {failure.message, {}});
  detail::require_all_succeeded(reports, transport.rank(), fmt::format("restoring checkpoint {}", path.str()),
                                failure.error);
  return result;
}

}  // namespace

RestoreResult restore_checkpoint(const storage::Location& path, std::span<const RestoreTarget> targets,
                                 Transport& transport, const RestoreOptions& options) {
  std::vector<NamedArray> arrays;
  RestoreResult result = run_collectively(path, transport, [&](const checkpoint::Reader& reader) {
    for (const RestoreTarget& target : targets) {
      const checkpoint::TensorEntry& tensor = reader.tensor(target.name);
      try {
        arrays.push_back({target.name, ShardedArray::allocate(tensor.shape, tensor.dtype, target.sharding,
                                                              target.topology, transport.rank())});
      } catch (const Error& e) {  // a sharding that does not fit the saved shape: say which tensor
        throw e.with_context(fmt::format("tensor {} (saved as {} {})", json_quoted(tensor.name),
                                         dtype_name(tensor.dtype), Box::whole(tensor.shape).to_string()));
      }
    }
    restore_arrays(reader, arrays, options);
  });
  result.arrays = std::move(arrays);
  return result;
}

RestoreResult restore_checkpoint_into(const storage::Location& path, std::span<NamedArray> arrays,
                                      Transport& transport, const RestoreOptions& options) {
  return run_collectively(path, transport,
                          [&](const checkpoint::Reader& reader) { restore_arrays(reader, arrays, options); });
}

}  // namespace reshard
