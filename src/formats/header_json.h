// The JSON grammar of a safetensors header, parsed by hand: strict RFC 8259
// with serde_json's limits (nesting, number range), and fast enough for
// 10,000-tensor headers. Internal to the formats layer.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "reshard/formats/safetensors_header.h"

namespace reshard::formats_detail {

// Containers nested this deep are refused, as serde_json's recursion limit does.
inline constexpr int kMaxJsonDepth = 128;

struct ParsedEntries {
  std::optional<safetensors::Metadata> metadata;
  std::vector<safetensors::TensorInfo> tensors;  // in the order of the JSON
};

// Parses the header's JSON into its entries (an object of name -> {dtype,
// shape, data_offsets}, plus an optional string-to-string "__metadata__");
// offsets and sizes are not checked here. Throws Error(kInvalidHeaderJson)
// naming `file`, the byte position and, inside an entry, the tensor.
ParsedEntries parse_header_entries(std::string_view json, std::string_view file);

}  // namespace reshard::formats_detail
