// `reshard merge-lora BASE ADAPTER OUT`: a Hugging Face base model plus a PEFT
// LoRA adapter to a merged Hugging Face model folder, tensor by tensor.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/job_options.h"
#include "cli/path_checks.h"
#include "cli/progress.h"
#include "cli/upload_flags.h"
#include "reshard/formats/model_files.h"
#include "reshard/storage/location.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/layout/error.h"
#include "reshard/layout/parse.h"
#include "reshard/pipelines/merge_lora.h"

namespace reshard::cli {
namespace {

struct MergeLoraCliOptions {
  std::string base;
  std::string adapter;
  std::string out;
  std::string max_shard_size = "5GB";
  std::string dtype;
  bool force = false;
  int threads = 0;
  UploadFlags upload;
};

std::optional<DType> parse_cast(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const DType dtype = dtype_from_string(text);
  if (!is_castable_float(dtype)) {
    throw Error(ErrorCode::kParse, fmt::format("--dtype {}: must be f32, f16 or bf16", text));
  }
  return dtype;
}

void merge_lora(const MergeLoraCliOptions& cli) {
  MergeLoraOptions options;
  options.dtype = parse_cast(cli.dtype);
  options.max_shard_size = parse_byte_size(cli.max_shard_size);
  options.replace = cli.force;
  options.threads = cli.threads;
  options.upload = upload_options(cli.upload);
  // The total is only known once the base is open; the progress line counts output bytes.
  const ModelFiles base = open_model_files(storage::Location::parse(cli.base), safetensors::ReadMode::kPread);
  uint64_t total = 0;
  for (const TensorCatalog::Entry& entry : base.catalog.tensors()) {
    total += dtype_byte_size(cast_dtype(entry.info->dtype, options.dtype), static_cast<uint64_t>(entry.info->elements()));
  }
  Progress progress("merging", total);
  options.progress = [&progress](uint64_t bytes) { progress.advance(bytes); };
  const MergeLoraResult summary = merge_lora_folder(storage::Location::parse(cli.base),
                                                    storage::Location::parse(cli.adapter),
                                                    storage::Location::parse(cli.out), options);
  progress.finish();
  for (const std::string& warning : summary.warnings) {
    const std::string line = "warning: " + warning + "\n";
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
  }
  std::cout << fmt::format("wrote {}: Hugging Face folder ({} file{}, {} tensors, {} merged with the adapter{}, {} "
                           "bytes of tensor data{}{})\n",
                           cli.out, summary.files, summary.files == 1 ? "" : "s", summary.tensors, summary.merged,
                           summary.replaced == 0 ? "" : fmt::format(", {} taken from it whole", summary.replaced),
                           summary.bytes, summary.carried.empty() ? "" : ", with ",
                           fmt::format("{}", fmt::join(summary.carried, ", ")));
}

}  // namespace

void add_merge_lora_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "merge-lora",
      "Merge a PEFT LoRA adapter into its base model as PEFT's merge_and_unload does: W += (B @ A) * scaling\n"
      "for every adapted weight (scaling = lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora;\n"
      "rank_pattern and alpha_pattern override r and alpha per module; fan_in_fan_out transposes the delta),\n"
      "computed in f32 and rounded once to the weight's dtype (round to nearest even). Also: DoRA (use_dora:\n"
      "each output row, or column with fan_in_fan_out, of W + dW times lora_magnitude_vector / its norm),\n"
      "LoRA on embeddings (lora_embedding_A/B), lora_B's bias (lora_bias: added to the layer's bias times\n"
      "scaling), and modules_to_save (the adapter's whole copies replace the base's tensors). Every adapter\n"
      "key must name a module of the base model (a wrong prefix is an error naming the key, where PEFT would\n"
      "silently ignore it); other adapter types, a key of no kind PEFT writes and a config that does not\n"
      "match the keys (use_dora without magnitudes, ...) are refused by name, exit 1, nothing written.\n"
      "Tensors are merged one block of rows at a time, so memory stays far below the model's size.\n"
      "OUT is written as convert writes a folder (split at --max-shard-size, with an index when split),\n"
      "with BASE's other small files carried (config.json, generation_config.json, the tokenizer's files),\n"
      "and appears only when complete. A BASE without config.json merges with a warning: transformers\n"
      "cannot load the result until one is added.\n"
      "BASE, ADAPTER and OUT may be s3://BUCKET/KEY or gs://BUCKET/KEY: the inputs are read by byte ranges; an\n"
      "OUT there gets its weight files uploaded in parts (--part-size), then the carried files, the index last.\n"
      "Examples:\n"
      "  reshard merge-lora llama-7b/ my-adapter/ llama-7b-merged/\n"
      "  reshard merge-lora llama-7b/ my-adapter/ merged/ --dtype bf16 --max-shard-size 2GB --force\n"
      "  reshard merge-lora llama-7b/ my-adapter/ merged/ --threads 4\n"
      "  reshard merge-lora s3://my-bucket/llama-7b s3://my-bucket/my-adapter gs://my-bucket/merged");
  auto options = std::make_shared<MergeLoraCliOptions>();
  cmd->add_option("BASE", options->base,
                  "The base model: a Hugging Face folder or a .safetensors file (a local path, s3:// or gs://)")
      ->required()
      ->check(storage_location());
  cmd->add_option("ADAPTER", options->adapter, "A PEFT LoRA adapter folder (adapter_model.safetensors, "
                                               "adapter_config.json; a local path, s3:// or gs://)")
      ->required()
      ->check(storage_location());
  cmd->add_option("OUT", options->out, "The merged model folder to create (a local path, s3:// or gs://)")
      ->required()
      ->check(storage_location());
  cmd->add_option("--max-shard-size", options->max_shard_size,
                  "Largest file of the folder (5GB, 500MB, 1.5GiB or bytes); a larger tensor gets a file of its own")
      ->capture_default_str();
  cmd->add_option("--dtype", options->dtype,
                  "Cast F32/F16/BF16 tensors to f32, f16 or bf16 after merging (round to nearest even); config.json's "
                  "dtype and torch_dtype follow. Integer, bool and other tensors are copied unchanged");
  cmd->add_option("--threads", options->threads,
                  "Threads that merge each block of rows (0: every core); reading the next block and writing the "
                  "last one run beside them")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--force", options->force,
                "Replace an existing OUT's weight files (model*.safetensors and the index); other files stay");
  add_upload_flags(*cmd, options->upload, "OUT");
  add_timeout_option(*cmd);
  cmd->callback([options] { merge_lora(*options); });
}

}  // namespace reshard::cli
