// `reshard verify PATH`: every header rule, the index, and every tensor's bytes read back.
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/progress.h"
#include "reshard/formats/model_files.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/layout/error.h"

namespace reshard::cli {
namespace {

// Reads each tensor through plain reads, so an unreadable block is an error
// (kIo naming the file and tensor) rather than a signal from a mapping.
void read_every_tensor(const TensorCatalog& catalog) {
  Progress progress("verifying", catalog.total_bytes());
  for (const TensorCatalog::Entry& entry : catalog.tensors()) {
    try {
      stream_tensor(catalog.file_of(entry), *entry.info, entry.info->dtype,
                    [&progress](std::span<const std::byte> bytes) { progress.advance(bytes.size()); });
    } catch (const Error& e) {
      throw e.with_context(fmt::format("{}: tensor '{}'", catalog.file_name(entry.file), entry.info->name));
    }
  }
  progress.finish();
}

// transformers never reads total_size, and writers that count shared storage
// once legitimately differ, so a mismatch is worth a warning, not a failure.
void warn_on_index_totals(const ModelFiles& model) {
  if (!model.index || !model.index->total_size) return;
  const uint64_t actual = model.catalog.total_bytes();
  if (*model.index->total_size != actual) {
    std::cerr << fmt::format("warning: {}: index metadata total_size is {} but the tensors hold {} bytes\n",
                             model.path.string(), *model.index->total_size, actual);
  }
}

}  // namespace

void add_verify_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "verify",
      "Check a .safetensors file or a model / adapter folder completely: every header rule, the index,\n"
      "and every tensor's bytes read back. Exit 0 with a summary, or 1 naming the file and tensor at fault.\n"
      "Example:\n  reshard verify llama-7b/");
  auto path = std::make_shared<std::string>();
  cmd->add_option("PATH", *path, "A .safetensors file or a model / adapter folder")->required();
  cmd->callback([path] {
    const ModelFiles model = open_model_files(*path, safetensors::ReadMode::kPread);
    read_every_tensor(model.catalog);
    warn_on_index_totals(model);
    const TensorCatalog& catalog = model.catalog;
    std::cout << fmt::format("ok: {}: {} ({} file{}, {} tensors, {} parameters, {} bytes of tensor data)\n",
                             model.path.string(), model_format_name(model.format), catalog.files().size(),
                             catalog.files().size() == 1 ? "" : "s", catalog.tensors().size(),
                             catalog.total_elements(), catalog.total_bytes());
  });
}

}  // namespace reshard::cli
