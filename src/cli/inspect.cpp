// `reshard inspect PATH [--json] [--hash]`: what tensors a file or folder holds.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/path_checks.h"
#include "cli/progress.h"
#include "cli/sha256.h"
#include "cli/unfinished_uploads.h"
#include "formats/checksum.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/formats/model_files.h"
#include "reshard/storage/location.h"
#include "reshard/formats/tensor_stream.h"

namespace reshard::cli {

using formats_detail::checksum_hex;
using formats_detail::xxh64;

namespace {

using Entry = TensorCatalog::Entry;

struct InspectOptions {
  std::string path;
  bool json = false;
  bool hash = false;
  // What unfinished uploads left beside the path (unfinished_uploads.h).
  std::vector<std::string> unfinished;
};

// The JSON document's "unfinished_uploads", only where there are any: the
// contract's documents stay as they were for a path without.
void add_unfinished(nlohmann::ordered_json& out, const InspectOptions& options) {
  if (!options.unfinished.empty()) out["unfinished_uploads"] = options.unfinished;
}

std::vector<const Entry*> sorted_by_name(const TensorCatalog& catalog) {
  std::vector<const Entry*> entries;
  for (const Entry& entry : catalog.tensors()) entries.push_back(&entry);
  std::sort(entries.begin(), entries.end(),
            [](const Entry* a, const Entry* b) { return a->info->name < b->info->name; });
  return entries;
}

std::string tensor_sha256(const TensorCatalog& catalog, const Entry& entry) {
  Sha256 sha;
  stream_tensor(catalog.file_of(entry), *entry.info, entry.info->dtype,
                [&sha](std::span<const std::byte> bytes) { sha.update(bytes); });
  return sha.hex_digest();
}

nlohmann::ordered_json metadata_json(const std::optional<safetensors::Metadata>& metadata) {
  if (!metadata) return nullptr;
  nlohmann::ordered_json object = nlohmann::ordered_json::object();
  for (const auto& [key, value] : *metadata) object[key] = value;
  return object;
}

void print_json(const ModelFiles& model, const InspectOptions& options) {
  const TensorCatalog& catalog = model.catalog;
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const Entry* entry : sorted_by_name(catalog)) {
    const safetensors::TensorInfo& info = *entry->info;
    nlohmann::ordered_json tensor = {{"name", info.name},
                                     {"dtype", dtype_name(info.dtype)},
                                     {"shape", info.shape},
                                     {"bytes", info.byte_size()},
                                     {"file", catalog.file_name(entry->file)}};
    if (options.hash) tensor["sha256"] = tensor_sha256(catalog, *entry);
    tensors.push_back(std::move(tensor));
  }
  nlohmann::ordered_json out = {{"format", model_format_name(model.format)},
                                {"metadata", metadata_json(catalog.metadata())},
                                {"tensors", std::move(tensors)}};
  add_unfinished(out, options);
  std::cout << out.dump(2) << "\n";
}

std::string metadata_text(const std::optional<safetensors::Metadata>& metadata) {
  if (!metadata) return "none";
  std::vector<std::string> pairs;
  for (const auto& [key, value] : *metadata) pairs.push_back(key + "=" + value);
  return pairs.empty() ? "{}" : fmt::format("{}", fmt::join(pairs, ", "));
}

void print_text(const ModelFiles& model, const InspectOptions& options) {
  const TensorCatalog& catalog = model.catalog;
  const std::vector<const Entry*> entries = sorted_by_name(catalog);
  size_t name_width = 4;
  for (const Entry* entry : entries) name_width = std::max(name_width, entry->info->name.size());
  std::string out = fmt::format("{:<{}}  {:<11}  {:<20}  {:>14}  {}{}\n", "NAME", name_width, "DTYPE",
                                "SHAPE", "BYTES", "FILE", options.hash ? "  SHA256" : "");
  for (const Entry* entry : entries) {
    const safetensors::TensorInfo& info = *entry->info;
    const std::string hash = options.hash ? "  " + tensor_sha256(catalog, *entry) : "";
    out += fmt::format("{:<{}}  {:<11}  {:<20}  {:>14}  {}{}\n", info.name, name_width, dtype_name(info.dtype),
                       fmt::format("[{}]", fmt::join(info.shape, ", ")), info.byte_size(),
                       catalog.file_name(entry->file), hash);
  }
  out += fmt::format("{}: {} tensors, {} parameters, {} bytes ({}) in {} file{}; format {}; metadata {}\n",
                     model.path.str(), entries.size(), catalog.total_elements(), catalog.total_bytes(),
                     human_bytes(catalog.total_bytes()), catalog.files().size(),
                     catalog.files().size() == 1 ? "" : "s", model_format_name(model.format),
                     metadata_text(catalog.metadata()));
  std::cout << out;
}

// ---- checkpoints ----

std::vector<const checkpoint::TensorEntry*> sorted_by_name(const checkpoint::Manifest& manifest) {
  std::vector<const checkpoint::TensorEntry*> tensors;
  for (const checkpoint::TensorEntry& tensor : manifest.tensors) tensors.push_back(&tensor);
  std::sort(tensors.begin(), tensors.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  return tensors;
}

std::string tensor_sha256(const checkpoint::Reader& reader, const checkpoint::TensorEntry& tensor) {
  const Box whole = Box::whole(tensor.shape);
  std::vector<std::byte> bytes(static_cast<size_t>(checkpoint::dense_bytes(tensor.dtype, tensor.shape)));
  reader.read_box(tensor, whole, bytes);
  Sha256 sha;
  sha.update(bytes);
  return sha.hex_digest();
}

nlohmann::ordered_json box_json(const Box& box) {
  nlohmann::ordered_json intervals = nlohmann::ordered_json::array();
  for (size_t d = 0; d < box.rank(); ++d) intervals.push_back({box.interval(d).begin, box.interval(d).end});
  return intervals;
}

void print_checkpoint_json(const checkpoint::Reader& reader, const InspectOptions& options) {
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const checkpoint::TensorEntry* tensor : sorted_by_name(reader.manifest())) {
    nlohmann::ordered_json chunks = nlohmann::ordered_json::array();
    for (const checkpoint::Chunk& chunk : tensor->chunks) {
      nlohmann::ordered_json entry = {{"box", box_json(chunk.box)}, {"file", chunk.file}, {"offset", chunk.offset},
                                      {"length", chunk.length}, {"xxh64", checksum_hex(chunk.xxh64)}};
      if (!chunk.blocks.empty()) entry["blocks"] = chunk.blocks.size();
      chunks.push_back(std::move(entry));
    }
    nlohmann::ordered_json entry = {{"name", tensor->name},
                                    {"dtype", dtype_name(tensor->dtype)},
                                    {"shape", tensor->shape},
                                    {"bytes", checkpoint::dense_bytes(tensor->dtype, tensor->shape)},
                                    {"layout", tensor->layout},
                                    {"metadata", metadata_json(tensor->metadata)},
                                    {"chunks", std::move(chunks)}};
    if (options.hash) entry["sha256"] = tensor_sha256(reader, *tensor);
    tensors.push_back(std::move(entry));
  }
  nlohmann::ordered_json out = {{"format", "checkpoint"},
                                {"version", reader.manifest().version()},
                                {"metadata", metadata_json(reader.manifest().metadata)}};
  if (reader.manifest().block_bytes != 0) out["block_bytes"] = reader.manifest().block_bytes;
  out["tensors"] = std::move(tensors);
  add_unfinished(out, options);
  std::cout << out.dump(2) << "\n";
}

void print_checkpoint_text(const checkpoint::Reader& reader, const InspectOptions& options) {
  const checkpoint::Manifest& manifest = reader.manifest();
  std::string out;
  uint64_t elements = 0;
  for (const checkpoint::TensorEntry* tensor : sorted_by_name(manifest)) {
    const uint64_t bytes = checkpoint::dense_bytes(tensor->dtype, tensor->shape);
    elements += bytes / static_cast<uint64_t>(element_bytes(tensor->dtype));
    out += fmt::format("{}  {}  [{}]  {} bytes  {} chunk{}  saved as {}{}\n", tensor->name, dtype_name(tensor->dtype),
                       fmt::join(tensor->shape, ", "), bytes, tensor->chunks.size(), tensor->chunks.size() == 1 ? "" : "s",
                       tensor->layout.empty() ? "(unknown layout)" : tensor->layout,
                       options.hash ? "  sha256 " + tensor_sha256(reader, *tensor) : "");
    for (size_t c = 0; c < tensor->chunks.size(); ++c) {
      const checkpoint::Chunk& chunk = tensor->chunks[c];
      out += fmt::format("    chunk {}  {}  {} @{} +{}  xxh64 {}{}\n", c, chunk.box.to_string(), chunk.file, chunk.offset,
                         chunk.length, checksum_hex(chunk.xxh64),
                         chunk.blocks.empty() ? "" : fmt::format("  {} block{}", chunk.blocks.size(),
                                                                 chunk.blocks.size() == 1 ? "" : "s"));
    }
  }
  const std::string blocks =
      manifest.block_bytes == 0 ? std::string() : fmt::format(", checksum blocks of {} bytes", manifest.block_bytes);
  out += fmt::format("{}: {} tensors, {} parameters, {} bytes ({}) in {} data file{}; format checkpoint (version {}{}); "
                     "metadata {}\n",
                     reader.folder().str(), manifest.tensors.size(), elements, manifest.total_bytes(),
                     human_bytes(manifest.total_bytes()), manifest.files.size(), manifest.files.size() == 1 ? "" : "s",
                     manifest.version(), blocks, metadata_text(manifest.metadata));
  std::cout << out;
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "inspect",
      "List the tensors of a .safetensors file, a Hugging Face model folder, a PEFT adapter folder or a\n"
      "reshard checkpoint (with each tensor's stored chunks and the layout it was saved from).\n"
      "Examples:\n  reshard inspect model.safetensors\n  reshard inspect llama-7b/ --json --hash");
  auto options = std::make_shared<InspectOptions>();
  cmd->add_option("PATH", options->path, "A .safetensors file, a model / adapter folder or a checkpoint")
      ->required()
      ->check(storage_location());
  cmd->add_flag("--json", options->json, "Print one JSON document on stdout: format, metadata, tensors by name");
  cmd->add_flag("--hash", options->hash, "Add each tensor's sha256 (reads every byte)");
  cmd->callback([options] {
    const storage::Location where = storage::Location::parse(options->path);
    options->unfinished = note_unfinished_uploads(where);
    if (checkpoint::is_checkpoint(where)) {
      const checkpoint::Reader reader = checkpoint::Reader::open(where);
      if (options->json) {
        print_checkpoint_json(reader, *options);
      } else {
        print_checkpoint_text(reader, *options);
      }
      return;
    }
    const ModelFiles model = open_model_files(where);
    if (options->json) {
      print_json(model, *options);
    } else {
      print_text(model, *options);
    }
  });
}

}  // namespace reshard::cli
