#include "reshard/formats/safetensors_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "formats/json_escape.h"
#include "layout/checked.h"
#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"

namespace reshard::safetensors {

using formats_detail::append_json_string;
using formats_detail::json_quoted;
using layout_detail::checked_add;

namespace {

// The reference's order: dtype descending in enum order, then name ascending
// bytewise (std::string compares as unsigned char, like Rust's str).
bool reference_order(const TensorSpec& a, const TensorSpec& b) {
  if (a.dtype != b.dtype) return a.dtype > b.dtype;
  return a.name < b.name;
}

uint64_t tensor_bytes(const TensorSpec& spec) {
  try {
    const uint64_t elements = element_count(spec.shape, "tensor element count");
    return dtype_byte_size(spec.dtype, elements);
  } catch (const Error& e) {
    throw e.with_context(fmt::format("tensor {}", json_quoted(spec.name)));
  }
}

void append_unsigned(std::string& out, uint64_t value) { fmt::format_to(std::back_inserter(out), "{}", value); }

void append_entry(std::string& out, const TensorInfo& tensor) {
  append_json_string(out, tensor.name);
  out += ":{\"dtype\":\"";
  out += dtype_name(tensor.dtype);
  out += "\",\"shape\":[";
  for (size_t d = 0; d < tensor.shape.size(); ++d) {
    if (d > 0) out.push_back(',');
    append_unsigned(out, tensor.shape[d]);
  }
  out += "],\"data_offsets\":[";
  append_unsigned(out, tensor.begin);
  out.push_back(',');
  append_unsigned(out, tensor.end);
  out += "]}";
}

// The JSON exactly as serde_json's compact writer gives it.
std::string header_json(const std::optional<Metadata>& metadata, const std::vector<TensorInfo>& tensors) {
  std::string json = "{";
  if (metadata) {
    json += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata->size(); ++i) {
      if (i > 0) json.push_back(',');
      append_json_string(json, (*metadata)[i].first);
      json.push_back(':');
      append_json_string(json, (*metadata)[i].second);
    }
    json.push_back('}');
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i > 0 || metadata) json.push_back(',');
    append_entry(json, tensors[i]);
  }
  json.push_back('}');
  return json;
}

void check_metadata_keys(const Metadata& metadata) {
  for (size_t i = 0; i < metadata.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (metadata[i].first == metadata[j].first) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("metadata key {} appears twice", json_quoted(metadata[i].first)));
      }
    }
  }
}

}  // namespace

Metadata default_metadata() { return {{"format", "pt"}}; }

FileLayout FileLayout::plan(std::vector<TensorSpec> specs, std::optional<Metadata> metadata) {
  if (metadata) check_metadata_keys(*metadata);
  std::stable_sort(specs.begin(), specs.end(), reference_order);
  std::vector<TensorInfo> tensors;
  tensors.reserve(specs.size());
  uint64_t offset = 0;
  for (TensorSpec& spec : specs) {
    if (spec.name == "__metadata__") {
      throw Error(ErrorCode::kInvalidArgument,
                  "a tensor cannot be called __metadata__: the name is reserved for metadata");
    }
    const uint64_t bytes = tensor_bytes(spec);
    const uint64_t end = checked_add(offset, bytes, "data buffer size");
    tensors.push_back(TensorInfo{std::move(spec.name), spec.dtype, std::move(spec.shape), offset, end});
    offset = end;
  }
  std::string json = header_json(metadata, tensors);
  json.append((8 - json.size() % 8) % 8, ' ');
  if (json.size() > kMaxHeaderBytes) {
    throw Error(file_rule::kHeaderTooLarge,
                fmt::format("header too large: {} bytes, the limit is {}", json.size(), kMaxHeaderBytes));
  }
  FileLayout layout;
  layout.header_ = Header(json.size(), std::move(metadata), std::move(tensors));
  layout.header_bytes_.reserve(kLengthPrefixBytes + json.size());
  uint64_t length = json.size();
  for (size_t i = 0; i < kLengthPrefixBytes; ++i, length >>= 8) {
    layout.header_bytes_.push_back(static_cast<char>(length & 0xFF));
  }
  layout.header_bytes_ += json;
  checked_add(layout.header_.data_start(), offset, "file size");
  return layout;
}

}  // namespace reshard::safetensors
