// `reshard verify PATH`: every header rule, the index, and every tensor's bytes read back.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/path_checks.h"
#include "cli/progress.h"
#include "cli/unfinished_uploads.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/formats/model_files.h"
#include "reshard/storage/location.h"
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
                             model.path.str(), *model.index->total_size, actual);
  }
}

// The reference reader accepts a header that names a tensor twice and keeps
// the last entry; so does reshard, but a file like that is worth pointing out.
void warn_on_repeated_names(const TensorCatalog& catalog) {
  for (size_t f = 0; f < catalog.files().size(); ++f) {
    for (const std::string& name : catalog.files()[f].header().repeated_names()) {
      std::cerr << fmt::format("warning: {}: the header repeats tensor '{}' (its last entry is used, as the "
                               "reference reader does)\n",
                               catalog.file_name(f), name);
    }
  }
}

// Every chunk read back and checked against its checksums (each block's and
// the whole chunk's); the first damage found names the file, the tensor, the
// chunk and, in version 2, the block.
void verify_checkpoint(const storage::Location& where) {
  const checkpoint::Reader reader = checkpoint::Reader::open(where);
  const checkpoint::Manifest& manifest = reader.manifest();
  Progress progress("verifying", manifest.total_bytes());
  std::vector<std::byte> bytes;
  uint64_t elements = 0;
  for (const checkpoint::TensorEntry& tensor : manifest.tensors) {
    for (size_t c = 0; c < tensor.chunks.size(); ++c) {
      bytes.resize(static_cast<size_t>(tensor.chunks[c].length));
      reader.read_chunk(tensor, c, bytes);
      progress.advance(bytes.size());
    }
    elements += checkpoint::dense_bytes(tensor.dtype, tensor.shape) / static_cast<uint64_t>(element_bytes(tensor.dtype));
  }
  progress.finish();
  uint64_t blocks = 0;
  for (const checkpoint::TensorEntry& tensor : manifest.tensors) {
    for (const checkpoint::Chunk& chunk : tensor.chunks) blocks += chunk.blocks.size();
  }
  const std::string checked = manifest.block_bytes == 0
                                  ? std::string("version 1, one checksum per chunk")
                                  : fmt::format("version 2, {} checksum blocks of {} bytes", blocks, manifest.block_bytes);
  std::cout << fmt::format(
      "ok: {}: checkpoint ({} data file{}, {} tensors, {} parameters, {} bytes of tensor data; {})\n", where.str(),
      manifest.files.size(), manifest.files.size() == 1 ? "" : "s", manifest.tensors.size(), elements,
      manifest.total_bytes(), checked);
}

}  // namespace

void add_verify_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "verify",
      "Check a .safetensors file, a model / adapter folder or a reshard checkpoint completely: every header\n"
      "rule, the index or manifest, checksums where the format has them,\n"
      "and every tensor's bytes read back. Exit 0 with a summary, or 1 naming the file and tensor at fault.\n"
      "Example:\n  reshard verify llama-7b/");
  auto path = std::make_shared<std::string>();
  cmd->add_option("PATH", *path, "A .safetensors file, a model / adapter folder or a checkpoint")
      ->required()
      ->check(storage_location());
  cmd->callback([path] {
    const storage::Location where = storage::Location::parse(*path);
    note_unfinished_uploads(where);
    if (checkpoint::is_checkpoint(where)) {
      verify_checkpoint(where);
      return;
    }
    const ModelFiles model = open_model_files(where, safetensors::ReadMode::kPread);
    read_every_tensor(model.catalog);
    warn_on_index_totals(model);
    warn_on_repeated_names(model.catalog);
    const TensorCatalog& catalog = model.catalog;
    std::cout << fmt::format("ok: {}: {} ({} file{}, {} tensors, {} parameters, {} bytes of tensor data)\n",
                             model.path.str(), model_format_name(model.format), catalog.files().size(),
                             catalog.files().size() == 1 ? "" : "s", catalog.tensors().size(),
                             catalog.total_elements(), catalog.total_bytes());
  });
}

}  // namespace reshard::cli
