// `reshard export CKPT OUT --map FILE|PRESET`: a checkpoint in a training
// framework's layout to a Hugging Face model folder, a PEFT adapter folder
// (--adapter-only) or a merged model (--merge-lora). Parses options; the
// export itself is the pipelines layer's export_checkpoint, run by every
// process of the job.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/job_options.h"
#include "cli/layout_options.h"
#include "cli/path_checks.h"
#include "cli/progress.h"
#include "job/job.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"
#include "reshard/layout/parse.h"
#include "reshard/pipelines/export_model.h"
#include "reshard/storage/location.h"

namespace reshard::cli {

using job::JobWorld;
using job::job_json;
using job::job_transport;
using job::job_world;

namespace {

struct ExportFlags {
  std::string checkpoint;
  std::string out;
  std::string map;
  bool adapter_only = false;
  bool merge_lora = false;
  std::string base;
  std::optional<int> gather_to;
  std::string dtype;
  std::string max_shard_size = "5GB";
  bool max_shard_size_given = false;
  bool force = false;
  std::string part_size;
  uint32_t parts_in_flight = 4;
  bool json = false;
};

[[noreturn]] void usage(const std::string& message) { throw Error(ErrorCode::kParse, message); }

std::optional<DType> parse_target_dtype(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const DType dtype = dtype_from_flag(text, "--dtype");
  if (!is_castable_float(dtype)) usage(fmt::format("--dtype {}: must be f32, f16 or bf16", text));
  return dtype;
}

std::string_view output_name(ExportKind kind) {
  switch (kind) {
    case ExportKind::kModel: return "Hugging Face folder";
    case ExportKind::kAdapterOnly: return "PEFT adapter folder";
    case ExportKind::kMergedModel: return "Hugging Face folder, LoRA merged";
  }
  return "folder";
}

ExportOptions options_from_flags(const ExportFlags& flags) {
  ExportOptions options;
  options.kind = flags.adapter_only ? ExportKind::kAdapterOnly
                 : flags.merge_lora ? ExportKind::kMergedModel
                                    : ExportKind::kModel;
  if (!flags.base.empty() && !flags.adapter_only && !flags.merge_lora) {
    usage("--base is the model an adapter is checked against (--adapter-only) or merged into (--merge-lora): give one");
  }
  if (flags.adapter_only && flags.max_shard_size_given) {
    usage("--max-shard-size: an adapter is one file (adapter_model.safetensors)");
  }
  options.dtype = parse_target_dtype(flags.dtype);
  options.max_shard_size = parse_byte_size(flags.max_shard_size);
  if (!flags.base.empty()) options.base = storage::Location::parse(flags.base);
  options.gather_to = flags.gather_to;
  options.replace = flags.force;
  if (!flags.part_size.empty()) options.part_bytes = parse_byte_size(flags.part_size);
  options.parts_in_flight = std::max<uint32_t>(flags.parts_in_flight, 1);
  return options;
}

void run_export(const ExportFlags& flags) {
  ExportOptions options = options_from_flags(flags);
  const TensorMap map = load_tensor_map(flags.map);
  const JobWorld world = job_world();
  Transport& transport = job_transport();
  if (world.rank == 0) {
    std::cerr << fmt::format("exporting {} to {} ({}) with {} process{}{}\n", flags.checkpoint, flags.out,
                             output_name(options.kind), world.size, world.size == 1 ? "" : "es",
                             options.gather_to ? fmt::format(", gathered to process {}", *options.gather_to)
                                               : std::string(world.size == 1 ? "" : ", each writing its share"));
  }
  std::optional<Progress> progress;
  if (world.rank == 0 && world.size == 1) {
    progress.emplace("exporting", 0);
    options.progress = [&progress](uint64_t bytes) { progress->advance(bytes); };
  }
  const ExportResult result =
      export_checkpoint(storage::Location::parse(flags.checkpoint), storage::Location::parse(flags.out), map, transport,
                        options);
  if (progress) progress->finish();
  // What each process wrote (for an object store: uploaded), for --json.
  const uint64_t mine = result.bytes_written;
  const auto written = transport.all_gather(std::as_bytes(std::span(&mine, 1)));
  if (world.rank != 0) return;
  if (flags.json) {
    nlohmann::ordered_json processes = nlohmann::ordered_json::array();
    for (size_t rank = 0; rank < written.size(); ++rank) {
      uint64_t bytes = 0;
      std::memcpy(&bytes, written[rank].data(), std::min(written[rank].size(), sizeof bytes));
      processes.push_back({{"rank", rank}, {"bytes_written", bytes}});
    }
    const nlohmann::ordered_json out = {{"out", flags.out},
                                        {"kind", output_name(options.kind)},
                                        {"files", result.files},
                                        {"tensors", result.tensors},
                                        {"merged", result.merged},
                                        {"bytes", result.bytes},
                                        {"processes", processes},
                                        {"job", job_json()},
                                        {"seconds", result.seconds.total}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("wrote {}: {} ({} file{}, {} tensors{}, {} bytes of tensor data)\n", flags.out,
                           output_name(options.kind), result.files, result.files == 1 ? "" : "s", result.tensors,
                           options.kind == ExportKind::kMergedModel ? fmt::format(", {} merged", result.merged) : "",
                           result.bytes);
}

std::string help_text() {
  return "Export a reshard checkpoint in a training framework's layout (stacked layers, separate head axes)\n"
         "to a Hugging Face model folder (weights split at --max-shard-size, index, config.json and\n"
         "generation_config.json from the checkpoint's 'reshard.hf_config' and 'reshard.generation_config'\n"
         "metadata, which import keeps there), or with --adapter-only to a PEFT adapter folder\n"
         "(adapter_model.safetensors, adapter_config.json from 'reshard.lora_config', target_modules from\n"
         "the keys), or with --merge-lora to a model with every LoRA delta merged as merge-lora merges it\n"
         "(W += B @ A * scaling in f32, rounded back once; DoRA's magnitudes, LoRA on embeddings, lora_B's\n"
         "bias and modules_to_save copies too: map outputs named as PEFT names them, e.g.\n"
         "base_model.model.<module>.lora_magnitude_vector). A LoRA run's checkpoint holds the factors alone:\n"
         "--merge-lora --base HF merges them into the weights of the Hugging Face folder HF, each process\n"
         "reading only the base's bytes of its blocks (config.json and generation_config.json then come from\n"
         "HF). The map renames, unstacks, merges axes, transposes and casts, inside the copies\n"
         "that move the bytes. Every map error (a tensor no rule takes, a shape that does not factor, two\n"
         "outputs with one name) and every adapter key naming no module of the base is reported before\n"
         "anything is written. Under mpirun every process reads only the checkpoint bytes of its share of\n"
         "the output and writes it at its final offset (OUT must be on a file system they share), and one\n"
         "commits; --gather-to 0 streams every block to process 0, which alone writes. OUT appears only when\n"
         "complete; an existing OUT is refused unless --force.\n\n"
         "OUT may be s3://BUCKET/PREFIX or gs://BUCKET/PREFIX: every weight file is one multipart upload (GCS:\n"
         "composed components), each process producing and uploading the parts it holds, nothing gathered;\n"
         "process 0 completes each file once every part is in, then writes the configs and the index last.\n"
         "Credentials and endpoints come from the environment as the stores' own tools take them\n"
         "(AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_ENDPOINT_URL, ...; GOOGLE_APPLICATION_CREDENTIALS,\n"
         "STORAGE_EMULATOR_HOST). A failed export aborts its uploads: nothing appears, nothing stays billed.\n"
         "CKPT may be s3:// or gs:// too: each process reads only the byte ranges of its share.\n\n" +
         tensor_map_help() +
         "\n\nExamples:\n"
         "  reshard export ckpt/ llama-hf/ --map levanter-llama\n"
         "  mpirun -np 4 reshard export ckpt/ llama-hf/ --map levanter-llama --dtype bf16 --max-shard-size 2GB\n"
         "  reshard export ckpt/ my-adapter/ --map levanter-llama --adapter-only --base llama-hf/\n"
         "  mpirun -np 4 reshard export ckpt/ merged/ --map my-map.json --merge-lora --gather-to 0\n"
         "  mpirun -np 4 reshard export lora-ckpt/ s3://my-bucket/merged --map levanter-llama --merge-lora \\\n"
         "      --base s3://my-bucket/llama-hf\n"
         "  mpirun -np 4 reshard export ckpt/ s3://my-bucket/llama-hf --map levanter-llama --part-size 64MiB\n"
         "  reshard export gs://my-bucket/ckpt llama-hf/ --map levanter-llama";
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", help_text());
  auto flags = std::make_shared<ExportFlags>();
  cmd->add_option("CKPT", flags->checkpoint,
                  "A reshard checkpoint folder, in the framework's layout: a local path, s3://BUCKET/PREFIX or "
                  "gs://BUCKET/PREFIX")
      ->required()
      ->check(storage_location());
  cmd->add_option("OUT", flags->out,
                  "The Hugging Face or PEFT adapter folder to create: a local path, s3://BUCKET/PREFIX or "
                  "gs://BUCKET/PREFIX")
      ->required()
      ->check(storage_location());
  cmd->add_option("--map", flags->map, "A preset (levanter-llama) or a JSON map file (see above)")->required();
  auto* adapter = cmd->add_flag("--adapter-only", flags->adapter_only,
                                "Write only the LoRA factors, as a PEFT adapter folder");
  auto* merge = cmd->add_flag("--merge-lora", flags->merge_lora,
                              "Merge every LoRA delta into its weight; the factors are not written");
  adapter->excludes(merge);
  cmd->add_option("--base", flags->base,
                  "A Hugging Face model folder: with --adapter-only, the model whose modules the adapter keys "
                  "must name (default: the checkpoint's own); with --merge-lora, the weights a checkpoint of "
                  "LoRA factors alone merges into; local or s3://, gs://")
      ->check(storage_location());
  cmd->add_option("--gather-to", flags->gather_to,
                  "Stream every block to this process, which alone writes (for an OUT the processes do not share)");
  cmd->add_option("--dtype", flags->dtype,
                  "Cast F32/F16/BF16 outputs to f32, f16 or bf16 (round to nearest even; a map rule's own dtype "
                  "wins); integer and bool tensors are left alone");
  auto* max_shard = cmd->add_option("--max-shard-size", flags->max_shard_size,
                                    "Largest weight file (5GB, 500MB, 1.5GiB or bytes); a larger tensor gets a file "
                                    "of its own")
                        ->capture_default_str();
  cmd->add_flag("--force", flags->force,
                "Replace an existing OUT's weight files (or adapter files); its other files stay. In an object "
                "store, which has no rename, each file is replaced whole but a reader may see old and new files "
                "side by side until the export ends (the index is written last)");
  cmd->add_option("--part-size", flags->part_size,
                  "OUT in an object store: each process uploads the parts of each file it produced, of this size "
                  "(S3: 5MiB to 5GiB; default 64MiB, larger where a file would have more than 10,000 parts)");
  cmd->add_flag("--json", flags->json,
                "Print one JSON document on stdout: the output, its files, tensors and bytes, and the bytes each "
                "process wrote (uploaded)");
  cmd->add_option("--parts-in-flight", flags->parts_in_flight,
                  "OUT in an object store: parts each process uploads at once (memory: about this many parts)")
      ->capture_default_str();
  add_timeout_option(*cmd);
  cmd->callback([flags, max_shard] {
    flags->max_shard_size_given = max_shard->count() > 0;
    run_export(*flags);
  });
}

}  // namespace reshard::cli
