// Producing any byte range of a converted file: what a process uploading
// some parts of an object writes. The rows of the source that the range
// covers are read (and cast) a bounded block at a time and clipped to the
// range, so a row that straddles two ranges is read by both of their
// writers, each keeping its own side, and no byte crosses between processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>

#include "pipelines/import/convert_source.h"
#include "reshard/formats/safetensors_layout.h"

namespace reshard::pipelines_detail {

// Receives bytes at their offset in the file.
using FileBytesSink = std::function<void(uint64_t file_offset, std::span<const std::byte> bytes)>;

// Writes the tensor bytes of `layout`'s file in [begin, end) (file offsets;
// the header's bytes are not written) to `sink`, each tensor read from the
// source tensor `source_index` names for it, cast to its planned dtype, at
// most about `block_bytes` at a time (one row at least; a tensor of a
// sub-byte dtype whose rows do not fill whole bytes is read whole). Returns
// the bytes written.
uint64_t write_file_range(const ConvertSource& source, const std::unordered_map<std::string, size_t>& source_index,
                          const safetensors::FileLayout& layout, uint64_t begin, uint64_t end,
                          const FileBytesSink& sink, uint64_t block_bytes = uint64_t{8} << 20);

}  // namespace reshard::pipelines_detail
