#include "reshard/formats/checkpoint_reader.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "formats/checkpoint_folder.h"
#include "formats/checksum.h"
#include "formats/json_escape.h"
#include "layout/box_copy.h"
#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"

namespace reshard::checkpoint {

using formats_detail::CheckpointFolder;
using formats_detail::checksum_hex;
using formats_detail::json_quoted;
using formats_detail::xxh64;
using layout_detail::BoxCopy;

namespace {

namespace fs = std::filesystem;

std::string chunk_label(const TensorEntry& tensor, size_t chunk) {
  return fmt::format("tensor {}: chunk {} {}", json_quoted(tensor.name), chunk, tensor.chunks[chunk].box.to_string());
}

// The first chunk stored in `file`, to name what a damaged file loses.
std::string first_chunk_in(const Manifest& manifest, std::string_view file) {
  for (const TensorEntry& tensor : manifest.tensors) {
    for (size_t i = 0; i < tensor.chunks.size(); ++i) {
      if (tensor.chunks[i].file == file) return fmt::format(" (it holds {})", chunk_label(tensor, i));
    }
  }
  return "";
}

}  // namespace

bool is_checkpoint(const storage::Location& folder) {
  if (folder.is_local()) {
    std::error_code ec;
    return fs::is_regular_file(folder.local_path() / kManifestFileName, ec);
  }
  return storage::open_store(folder)->stat(folder.child(kManifestFileName)).has_value();
}

struct Reader::State {
  storage::Location folder;
  Manifest manifest;
  std::unordered_map<std::string, safetensors::File> files;
  std::unordered_map<std::string_view, const TensorEntry*> by_name;
  mutable std::atomic<uint64_t> header_bytes{0};
  mutable std::atomic<uint64_t> data_bytes{0};
};

Reader::Reader(std::shared_ptr<State> state) : state_(std::move(state)) {}

Reader Reader::open(const storage::Location& folder) {
  auto state = std::make_shared<State>();
  state->folder = folder;
  const CheckpointFolder files(folder);
  const std::string text = files.read_manifest();
  state->header_bytes += text.size();
  state->manifest = parse_manifest(text, folder.child(kManifestFileName).str());
  for (const DataFile& data : state->manifest.files) {
    const storage::Location path = folder.child(data.name);
    const std::string lost = first_chunk_in(state->manifest, data.name);
    const uint64_t size = files.data_file_size(data.name, lost);
    if (size != data.size) {
      throw Error(file_rule::kIncompleteBuffer,
                  fmt::format("{}: data file has {} bytes, the manifest records {}: truncated or replaced{}",
                              path.str(), size, data.size, lost));
    }
    try {
      safetensors::File file = safetensors::File::open(path, safetensors::ReadMode::kPread);
      state->header_bytes += file.header().data_start();
      state->files.emplace(data.name, std::move(file));
    } catch (const Error& e) {
      throw e.with_context(fmt::format("data file{}", lost));
    }
  }
  for (const TensorEntry& tensor : state->manifest.tensors) {
    state->by_name.emplace(tensor.name, &tensor);
    for (size_t i = 0; i < tensor.chunks.size(); ++i) {
      const Chunk& chunk = tensor.chunks[i];
      const safetensors::File& file = state->files.at(chunk.file);
      const safetensors::TensorInfo* info = file.find(chunk.key);
      const bool agrees = info != nullptr && info->dtype == tensor.dtype &&
                          info->shape == safetensors::dims_of(chunk.box.shape()) &&
                          file.header().file_offset(*info) == chunk.offset;
      // The manifest matched its own checksum, so the data file is the damaged one.
      if (!agrees) {
        throw Error(ErrorCode::kChecksumMismatch,
                    fmt::format("{}: data file damaged or replaced: {}: its header has no tensor {} of the dtype, "
                                "shape and offset the manifest records",
                                folder.child(chunk.file).str(), chunk_label(tensor, i), json_quoted(chunk.key)));
      }
    }
  }
  return Reader(std::move(state));
}

const storage::Location& Reader::folder() const { return state_->folder; }

const Manifest& Reader::manifest() const { return state_->manifest; }

const TensorEntry& Reader::tensor(std::string_view name) const {
  const auto it = state_->by_name.find(name);
  if (it == state_->by_name.end()) {
    throw Error(ErrorCode::kMissingTensor,
                fmt::format("{}: the checkpoint has no tensor {}", state_->folder.str(), json_quoted(name)));
  }
  return *it->second;
}

const safetensors::File& Reader::file_of(const Chunk& chunk) const { return state_->files.at(chunk.file); }

void Reader::read_chunk_range(const TensorEntry& tensor, size_t index, uint64_t offset,
                              std::span<std::byte> out) const {
  const Chunk& chunk = tensor.chunks.at(index);
  const safetensors::File& file = file_of(chunk);
  try {
    file.read(file.tensor(chunk.key), offset, out);
  } catch (const Error& e) {
    throw e.with_context(fmt::format("{}: {}", state_->folder.child(chunk.file).str(), chunk_label(tensor, index)));
  }
  state_->data_bytes += out.size();
}

void Reader::check_block(const TensorEntry& tensor, size_t index, size_t block, std::span<const std::byte> bytes) const {
  const Chunk& chunk = tensor.chunks[index];
  const bool whole_chunk = chunk.blocks.empty();
  const uint64_t recorded = whole_chunk ? chunk.xxh64 : chunk.blocks[block];
  const uint64_t actual = xxh64(bytes);
  if (actual == recorded) return;
  const std::string which =
      whole_chunk ? std::string()
                  : fmt::format(": block {} (bytes [{}, +{}) of the chunk)", block,
                                static_cast<uint64_t>(block) * state_->manifest.block_bytes, bytes.size());
  throw Error(ErrorCode::kChecksumMismatch,
              fmt::format("{}: {}{}: checksum mismatch (xxh64 {} recorded, {} read): the data file is damaged",
                          state_->folder.child(chunk.file).str(), chunk_label(tensor, index), which,
                          checksum_hex(recorded), checksum_hex(actual)));
}

void Reader::read_chunk(const TensorEntry& tensor, size_t index, std::span<std::byte> out) const {
  const Chunk& chunk = tensor.chunks.at(index);
  if (out.size() != chunk.length) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} bytes for a chunk of {}", chunk_label(tensor, index),
                                                         out.size(), chunk.length));
  }
  const Box whole = chunk.box;
  read_chunk_blocks(tensor, index, std::span(&whole, 1), out);
  if (!chunk.blocks.empty() && xxh64(out) != chunk.xxh64) {
    throw Error(ErrorCode::kChecksumMismatch,
                fmt::format("{}: {}: checksum mismatch (xxh64 {} recorded, {} read): the data file is damaged",
                            state_->folder.child(chunk.file).str(), chunk_label(tensor, index),
                            checksum_hex(chunk.xxh64), checksum_hex(xxh64(out))));
  }
}

uint64_t Reader::read_chunk_blocks(const TensorEntry& tensor, size_t index, std::span<const Box> parts,
                                   std::span<std::byte> chunk_bytes) const {
  const Chunk& chunk = tensor.chunks.at(index);
  if (chunk_bytes.size() != chunk.length) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} bytes for a chunk of {}", chunk_label(tensor, index),
                                                         chunk_bytes.size(), chunk.length));
  }
  // A version 1 chunk is one block as long as the chunk.
  const uint64_t block_bytes = chunk.blocks.empty() ? std::max<uint64_t>(chunk.length, 1) : state_->manifest.block_bytes;
  const size_t blocks = static_cast<size_t>(block_count(chunk.length, block_bytes));
  const auto element_bytes = static_cast<uint64_t>(reshard::element_bytes(tensor.dtype));
  const Box local = Box::whole(chunk.box.shape());
  std::vector<char> needed(blocks, 0);
  for (const Box& part : parts) {
    if (!chunk.box.contains(part)) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: box {} is not inside the chunk",
                                                           chunk_label(tensor, index), part.to_string()));
    }
    if (part.empty()) continue;
    for_each_run(local, part.relative_to(chunk.box), [&](Run run) {
      const uint64_t begin = static_cast<uint64_t>(run.offset) * element_bytes;
      const uint64_t end = begin + static_cast<uint64_t>(run.length) * element_bytes;
      for (uint64_t b = begin / block_bytes; b * block_bytes < end; ++b) needed[static_cast<size_t>(b)] = 1;
    });
  }
  // Runs of needed blocks are read with one positional read each, then checked block by block.
  uint64_t read = 0;
  for (size_t first = 0; first < blocks;) {
    if (needed[first] == 0) {
      ++first;
      continue;
    }
    size_t last = first;
    while (last < blocks && needed[last] != 0) ++last;
    const uint64_t begin = first * block_bytes;
    const uint64_t end = std::min<uint64_t>(last * block_bytes, chunk.length);
    const std::span<std::byte> range = chunk_bytes.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
    read_chunk_range(tensor, index, begin, range);
    for (size_t b = first; b < last; ++b) {
      const uint64_t at = (b - first) * block_bytes;
      check_block(tensor, index, b, range.subspan(static_cast<size_t>(at),
                                                  static_cast<size_t>(std::min<uint64_t>(block_bytes, range.size() - at))));
    }
    read += range.size();
    first = last;
  }
  return read;
}

void Reader::read_chunk_part(const TensorEntry& tensor, size_t index, const Box& box, std::span<std::byte> out) const {
  const Chunk& chunk = tensor.chunks.at(index);
  const safetensors::File& file = file_of(chunk);
  try {
    file.read_box(file.tensor(chunk.key), box.relative_to(chunk.box), out);
  } catch (const Error& e) {
    throw e.with_context(fmt::format("{}: {}", state_->folder.child(chunk.file).str(), chunk_label(tensor, index)));
  }
  state_->data_bytes += out.size();
}

void Reader::read_box(const TensorEntry& tensor, const Box& box, std::span<std::byte> out) const {
  const auto element_bytes = static_cast<uint64_t>(reshard::element_bytes(tensor.dtype));
  if (out.size() != dense_bytes(tensor.dtype, box.shape())) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("tensor {}: box {} needs {} bytes, the buffer has {}", json_quoted(tensor.name),
                            box.to_string(), dense_bytes(tensor.dtype, box.shape()), out.size()));
  }
  if (!Box::whole(tensor.shape).contains(box)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("tensor {}: box {} is not inside its shape",
                                                         json_quoted(tensor.name), box.to_string()));
  }
  for (size_t i = 0; i < tensor.chunks.size(); ++i) {
    const Chunk& chunk = tensor.chunks[i];
    const Box common = chunk.box.intersect(box);
    if (common.empty()) continue;
    // Uninitialised: only the blocks read are touched.
    const std::unique_ptr<std::byte[]> bytes(new std::byte[static_cast<size_t>(chunk.length)]);
    read_chunk_blocks(tensor, i, std::span(&common, 1), std::span(bytes.get(), static_cast<size_t>(chunk.length)));
    BoxCopy(common, chunk.box, box, static_cast<size_t>(element_bytes)).copy(bytes.get(), out.data());
  }
}

ReadCounters Reader::counters() const { return {state_->header_bytes.load(), state_->data_bytes.load()}; }

}  // namespace reshard::checkpoint
