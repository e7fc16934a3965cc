#include "reshard/formats/checkpoint_manifest.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/checksum.h"
#include "formats/json_escape.h"
#include "layout/checked.h"
#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"

namespace reshard::checkpoint {

using formats_detail::checksum_hex;
using formats_detail::json_quoted;
using formats_detail::parse_checksum_hex;
using formats_detail::xxh64;
using layout_detail::checked_add;
using layout_detail::checked_product;

namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void invalid(std::string_view where, std::string_view what) {
  throw Error(file_rule::kInvalidManifest, fmt::format("{}: {}", where, what));
}

std::string tensor_context(std::string_view where, std::string_view tensor) {
  return fmt::format("{}: tensor {}", where, json_quoted(tensor));
}

std::string chunk_context(std::string_view where, std::string_view tensor, size_t chunk) {
  return fmt::format("{}: chunk {}", tensor_context(where, tensor), chunk);
}

// ---- writing ----

Json metadata_json(const safetensors::Metadata& metadata) {
  Json object = Json::object();
  for (const auto& [key, value] : metadata) object[key] = value;
  return object;
}

Json box_json(const Box& box) {
  Json intervals = Json::array();
  for (size_t d = 0; d < box.rank(); ++d) {
    intervals.push_back(Json::array({box.interval(d).begin, box.interval(d).end}));
  }
  return intervals;
}

Json body_json(const Manifest& manifest) {
  Json body = Json::object();
  if (manifest.metadata) body["metadata"] = metadata_json(*manifest.metadata);
  if (manifest.block_bytes != 0) body["block_bytes"] = manifest.block_bytes;
  Json files = Json::array();
  for (const DataFile& file : manifest.files) files.push_back({{"name", file.name}, {"size", file.size}});
  body["files"] = std::move(files);
  Json tensors = Json::array();
  for (const TensorEntry& tensor : manifest.tensors) {
    Json entry = {{"name", tensor.name}, {"dtype", dtype_name(tensor.dtype)}, {"shape", tensor.shape}};
    if (!tensor.layout.empty()) entry["layout"] = tensor.layout;
    if (tensor.metadata) entry["metadata"] = metadata_json(*tensor.metadata);
    Json chunks = Json::array();
    for (const Chunk& chunk : tensor.chunks) {
      Json entry_chunk = {{"box", box_json(chunk.box)},
                          {"file", chunk.file},
                          {"key", chunk.key},
                          {"offset", chunk.offset},
                          {"length", chunk.length},
                          {"xxh64", checksum_hex(chunk.xxh64)}};
      if (manifest.block_bytes != 0) {
        Json blocks = Json::array();
        for (uint64_t block : chunk.blocks) blocks.push_back(checksum_hex(block));
        entry_chunk["blocks"] = std::move(blocks);
      }
      chunks.push_back(std::move(entry_chunk));
    }
    entry["chunks"] = std::move(chunks);
    tensors.push_back(std::move(entry));
  }
  body["tensors"] = std::move(tensors);
  return body;
}

// ---- reading: typed accessors that name what they read ----

const Json& member(const Json& object, std::string_view key, std::string_view context) {
  const auto it = object.find(key);
  if (it == object.end()) invalid(context, fmt::format("missing \"{}\"", key));
  return *it;
}

const Json& object_member(const Json& object, std::string_view key, std::string_view context) {
  const Json& value = member(object, key, context);
  if (!value.is_object()) invalid(context, fmt::format("\"{}\" must be an object", key));
  return value;
}

const Json& array_member(const Json& object, std::string_view key, std::string_view context) {
  const Json& value = member(object, key, context);
  if (!value.is_array()) invalid(context, fmt::format("\"{}\" must be a list", key));
  return value;
}

std::string string_member(const Json& object, std::string_view key, std::string_view context) {
  const Json& value = member(object, key, context);
  if (!value.is_string()) invalid(context, fmt::format("\"{}\" must be a string", key));
  return value.get<std::string>();
}

uint64_t unsigned_value(const Json& value, std::string_view what, std::string_view context) {
  if (!value.is_number_unsigned()) invalid(context, fmt::format("{} must be a non-negative integer", what));
  return value.get<uint64_t>();
}

uint64_t unsigned_member(const Json& object, std::string_view key, std::string_view context) {
  return unsigned_value(member(object, key, context), fmt::format("\"{}\"", key), context);
}

int64_t extent_value(const Json& value, std::string_view what, std::string_view context) {
  const uint64_t v = unsigned_value(value, what, context);
  if (v > static_cast<uint64_t>(INT64_MAX)) invalid(context, fmt::format("{} {} is too large", what, v));
  return static_cast<int64_t>(v);
}

std::optional<safetensors::Metadata> metadata_member(const Json& object, std::string_view context) {
  const auto it = object.find("metadata");
  if (it == object.end()) return std::nullopt;
  if (!it->is_object()) invalid(context, "\"metadata\" must be an object of strings");
  safetensors::Metadata metadata;
  for (const auto& [key, value] : it->items()) {
    if (!value.is_string()) invalid(context, fmt::format("metadata value of {} must be a string", json_quoted(key)));
    metadata.emplace_back(key, value.get<std::string>());
  }
  return metadata;
}

DType dtype_member(const Json& object, std::string_view context) {
  const std::string name = string_member(object, "dtype", context);
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto dtype = static_cast<DType>(i);
    if (dtype_name(dtype) == name) {
      if (dtype_bits(dtype) % 8 != 0) invalid(context, fmt::format("dtype {} is not stored in checkpoints", name));
      return dtype;
    }
  }
  invalid(context, fmt::format("unknown dtype {}", json_quoted(name)));
}

Box box_member(const Json& object, size_t rank, std::string_view context) {
  const Json& intervals = array_member(object, "box", context);
  if (intervals.size() != rank) {
    invalid(context, fmt::format("box has {} dimensions, the tensor {}", intervals.size(), rank));
  }
  std::vector<int64_t> origin, extent;
  for (const Json& interval : intervals) {
    if (!interval.is_array() || interval.size() != 2) invalid(context, "each box dimension must be [begin, end]");
    const int64_t begin = extent_value(interval[0], "a box bound", context);
    const int64_t end = extent_value(interval[1], "a box bound", context);
    if (end < begin) invalid(context, fmt::format("box dimension [{}, {}] ends before it begins", begin, end));
    origin.push_back(begin);
    extent.push_back(end - begin);
  }
  return Box(std::move(origin), std::move(extent));
}

// A file name that stays inside the checkpoint folder.
bool is_plain_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos && name != kManifestFileName;
}

uint64_t checksum_value(const Json& value, std::string_view what, std::string_view context) {
  const auto checksum = value.is_string() ? parse_checksum_hex(value.get<std::string>()) : std::nullopt;
  if (!checksum) invalid(context, fmt::format("{} must be 16 lowercase hex digits", what));
  return *checksum;
}

Chunk parse_chunk(const Json& json, size_t rank, bool with_blocks, std::string_view context) {
  if (!json.is_object()) invalid(context, "a chunk must be an object");
  Chunk chunk;
  chunk.box = box_member(json, rank, context);
  chunk.file = string_member(json, "file", context);
  chunk.key = string_member(json, "key", context);
  chunk.offset = unsigned_member(json, "offset", context);
  chunk.length = unsigned_member(json, "length", context);
  chunk.xxh64 = checksum_value(member(json, "xxh64", context), "\"xxh64\"", context);
  if (with_blocks) {
    for (const Json& block : array_member(json, "blocks", context)) {
      chunk.blocks.push_back(checksum_value(block, "each block checksum", context));
    }
  }
  return chunk;
}

TensorEntry parse_tensor(const Json& json, bool with_blocks, std::string_view where) {
  if (!json.is_object()) invalid(where, "each tensor must be an object");
  TensorEntry tensor;
  tensor.name = string_member(json, "name", where);
  const std::string context = tensor_context(where, tensor.name);
  tensor.dtype = dtype_member(json, context);
  for (const Json& dim : array_member(json, "shape", context)) {
    tensor.shape.push_back(extent_value(dim, "a shape entry", context));
  }
  if (const auto it = json.find("layout"); it != json.end()) {
    if (!it->is_string()) invalid(context, "\"layout\" must be a string");
    tensor.layout = it->get<std::string>();
  }
  tensor.metadata = metadata_member(json, context);
  const Json& chunks = array_member(json, "chunks", context);
  for (size_t i = 0; i < chunks.size(); ++i) {
    tensor.chunks.push_back(parse_chunk(chunks[i], tensor.shape.size(), with_blocks, chunk_context(where, tensor.name, i)));
  }
  return tensor;
}

Manifest parse_body(const Json& body, int64_t version, std::string_view where) {
  Manifest manifest;
  manifest.metadata = metadata_member(body, where);
  if (version >= 2) {
    manifest.block_bytes = unsigned_member(body, "block_bytes", where);
    if (manifest.block_bytes == 0) invalid(where, "\"block_bytes\" must be positive");
  }
  for (const Json& file : array_member(body, "files", where)) {
    if (!file.is_object()) invalid(where, "each file must be an object");
    manifest.files.push_back({string_member(file, "name", where), unsigned_member(file, "size", where)});
  }
  for (const Json& tensor : array_member(body, "tensors", where)) manifest.tensors.push_back(parse_tensor(tensor, version >= 2, where));
  return manifest;
}

// ---- validation ----

// Chunks must tile the tensor: inside it, pairwise disjoint, and as many
// elements as it has. Disjointness is checked by a sweep along dimension 0,
// so only chunks whose first intervals overlap are compared.
void check_exact_cover(const TensorEntry& tensor, std::string_view where) {
  const Box whole = Box::whole(tensor.shape);
  int64_t covered = 0;
  for (size_t i = 0; i < tensor.chunks.size(); ++i) {
    const Box& box = tensor.chunks[i].box;
    if (!whole.contains(box) || box.empty()) {
      invalid(chunk_context(where, tensor.name, i),
              fmt::format("box {} is empty or not inside the shape {}", box.to_string(), whole.to_string()));
    }
    covered = checked_add(covered, box.volume(), "covered elements");
  }
  std::vector<size_t> order(tensor.chunks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const auto first_begin = [&](size_t i) { return tensor.shape.empty() ? 0 : tensor.chunks[i].box.origin()[0]; };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return first_begin(a) < first_begin(b); });
  for (size_t a = 0; a < order.size(); ++a) {
    const Box& box_a = tensor.chunks[order[a]].box;
    for (size_t b = a + 1; b < order.size(); ++b) {
      const Box& box_b = tensor.chunks[order[b]].box;
      if (!tensor.shape.empty() && box_b.origin()[0] >= box_a.interval(0).end) break;
      if (!box_a.intersect(box_b).empty()) {
        invalid(chunk_context(where, tensor.name, std::max(order[a], order[b])),
                fmt::format("box {} overlaps chunk {}'s box {}", box_b.to_string(), std::min(order[a], order[b]),
                            box_a.to_string()));
      }
    }
  }
  const int64_t volume = whole.volume();
  if (covered != volume) {
    invalid(tensor_context(where, tensor.name),
            fmt::format("its chunks hold {} of its {} elements", covered, volume));
  }
}

void check_chunk_in_file(const TensorEntry& tensor, size_t i, const std::unordered_map<std::string_view, uint64_t>& sizes,
                         std::string_view where) {
  const Chunk& chunk = tensor.chunks[i];
  const std::string context = chunk_context(where, tensor.name, i);
  const auto size = sizes.find(chunk.file);
  if (size == sizes.end()) invalid(context, fmt::format("file {} is not listed in \"files\"", json_quoted(chunk.file)));
  const uint64_t expected = dense_bytes(tensor.dtype, chunk.box.shape());
  if (chunk.length != expected) {
    invalid(context, fmt::format("length {} differs from the {} bytes of box {}", chunk.length, expected,
                                 chunk.box.to_string()));
  }
  uint64_t end = 0;
  if (__builtin_add_overflow(chunk.offset, chunk.length, &end) || end > size->second) {
    invalid(context, fmt::format("bytes [{}, +{}) pass the end of {} ({} bytes)", chunk.offset, chunk.length,
                                 chunk.file, size->second));
  }
}

void check_chunk_blocks(const TensorEntry& tensor, size_t i, uint64_t block_bytes, std::string_view where) {
  const Chunk& chunk = tensor.chunks[i];
  const uint64_t expected = block_bytes == 0 ? 0 : block_count(chunk.length, block_bytes);
  if (chunk.blocks.size() != expected) {
    invalid(chunk_context(where, tensor.name, i),
            block_bytes == 0 ? fmt::format("{} block checksums in a version 1 manifest", chunk.blocks.size())
                             : fmt::format("{} block checksums for {} bytes in blocks of {} (expected {})",
                                           chunk.blocks.size(), chunk.length, block_bytes, expected));
  }
}

}  // namespace

const TensorEntry* Manifest::find(std::string_view name) const {
  for (const TensorEntry& tensor : tensors) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

uint64_t Manifest::total_bytes() const {
  uint64_t total = 0;
  for (const TensorEntry& tensor : tensors) total = checked_add(total, dense_bytes(tensor.dtype, tensor.shape), "total bytes");
  return total;
}

uint64_t block_count(uint64_t length, uint64_t block_bytes) {
  return length / block_bytes + (length % block_bytes != 0 ? 1 : 0);
}

std::string chunk_key(std::string_view tensor, const Box& box) {
  std::string key(tensor);
  key += '[';
  for (size_t d = 0; d < box.rank(); ++d) {
    if (d > 0) key += ',';
    key += fmt::format("{}:{}", box.interval(d).begin, box.interval(d).end);
  }
  key += ']';
  return key;
}

uint64_t dense_bytes(DType dtype, const Shape& shape) {
  return dtype_byte_size(dtype, static_cast<uint64_t>(checked_product(shape, "element count")));
}

void validate_manifest(const Manifest& manifest, std::string_view where) {
  std::unordered_map<std::string_view, uint64_t> sizes;
  for (const DataFile& file : manifest.files) {
    if (!is_plain_file_name(file.name)) invalid(where, fmt::format("file name {} leaves the folder", json_quoted(file.name)));
    if (!sizes.emplace(file.name, file.size).second) invalid(where, fmt::format("file {} is listed twice", json_quoted(file.name)));
  }
  std::unordered_set<std::string_view> names;
  for (const TensorEntry& tensor : manifest.tensors) {
    if (!names.insert(tensor.name).second) invalid(tensor_context(where, tensor.name), "the name appears twice");
    try {
      dense_bytes(tensor.dtype, tensor.shape);
    } catch (const Error& e) {
      invalid(tensor_context(where, tensor.name), e.what());
    }
    check_exact_cover(tensor, where);
    for (size_t i = 0; i < tensor.chunks.size(); ++i) {
      check_chunk_in_file(tensor, i, sizes, where);
      check_chunk_blocks(tensor, i, manifest.block_bytes, where);
    }
  }
}

std::string serialize_manifest(const Manifest& manifest) {
  const Json body = body_json(manifest);
  const std::string compact = body.dump();
  const Json file = {{"format", kFormatName},
                     {"version", manifest.version()},
                     {"checksum", "xxh64:" + checksum_hex(xxh64(compact))},
                     {"manifest", body}};
  return file.dump() + "\n";
}

Manifest parse_manifest(std::string_view bytes, std::string_view where) {
  if (bytes.size() > kMaxManifestBytes) invalid(where, fmt::format("{} bytes is past the {}-byte limit", bytes.size(), kMaxManifestBytes));
  Json file;
  try {
    file = Json::parse(bytes.begin(), bytes.end());
  } catch (const Json::exception& e) {
    invalid(where, fmt::format("not valid JSON: {}", e.what()));
  }
  if (!file.is_object()) invalid(where, "the manifest must be a JSON object");
  const std::string format = string_member(file, "format", where);
  if (format != kFormatName) invalid(where, fmt::format("format {} is not {}", json_quoted(format), kFormatName));
  const Json& version = member(file, "version", where);
  const bool known = version.is_number_integer() && version.get<int64_t>() >= kOldestFormatVersion &&
                     version.get<int64_t>() <= kFormatVersion;
  if (!known) {
    invalid(where, fmt::format("unknown checkpoint format version {} (this reshard reads versions {} to {})",
                               version.dump(), kOldestFormatVersion, kFormatVersion));
  }
  const std::string checksum = string_member(file, "checksum", where);
  const Json& body = object_member(file, "manifest", where);
  const std::string expected = "xxh64:" + checksum_hex(xxh64(body.dump()));
  if (checksum != expected) {
    throw Error(ErrorCode::kChecksumMismatch,
                fmt::format("{}: the manifest does not match its checksum ({} recorded, {} computed): it was "
                            "edited or damaged",
                            where, checksum, expected));
  }
  Manifest manifest = parse_body(body, version.get<int64_t>(), where);
  validate_manifest(manifest, where);
  return manifest;
}

}  // namespace reshard::checkpoint
