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
#include "cli/progress.h"
#include "cli/sha256.h"
#include "reshard/formats/model_files.h"
#include "reshard/formats/tensor_stream.h"

namespace reshard::cli {
namespace {

using Entry = TensorCatalog::Entry;

struct InspectOptions {
  std::string path;
  bool json = false;
  bool hash = false;
};

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
  const nlohmann::ordered_json out = {{"format", model_format_name(model.format)},
                                      {"metadata", metadata_json(catalog.metadata())},
                                      {"tensors", std::move(tensors)}};
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
                     model.path.string(), entries.size(), catalog.total_elements(), catalog.total_bytes(),
                     human_bytes(catalog.total_bytes()), catalog.files().size(),
                     catalog.files().size() == 1 ? "" : "s", model_format_name(model.format),
                     metadata_text(catalog.metadata()));
  std::cout << out;
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "inspect",
      "List the tensors of a .safetensors file, a Hugging Face model folder or a PEFT adapter folder.\n"
      "Examples:\n  reshard inspect model.safetensors\n  reshard inspect llama-7b/ --json --hash");
  auto options = std::make_shared<InspectOptions>();
  cmd->add_option("PATH", options->path, "A .safetensors file or a model / adapter folder")->required();
  cmd->add_flag("--json", options->json, "Print one JSON document on stdout: format, metadata, tensors by name");
  cmd->add_flag("--hash", options->hash, "Add each tensor's sha256 (reads every byte)");
  cmd->callback([options] {
    const ModelFiles model = open_model_files(options->path);
    if (options->json) {
      print_json(model, *options);
    } else {
      print_text(model, *options);
    }
  });
}

}  // namespace reshard::cli
