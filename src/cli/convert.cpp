// `reshard convert SRC DST`: between a .safetensors file, a Hugging Face
// folder and a reshard checkpoint. Parses options; the conversion itself is
// the pipelines layer's convert_model, run by every process of the job.
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/checkpoint_layout_flags.h"
#include "cli/commands.h"
#include "cli/job_options.h"
#include "cli/layout_options.h"
#include "cli/path_checks.h"
#include "cli/progress.h"
#include "cli/upload_flags.h"
#include "job/job.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"
#include "reshard/layout/parse.h"
#include "reshard/pipelines/convert.h"
#include "reshard/storage/location.h"

namespace reshard::cli {

using job::JobWorld;
using job::job_transport;
using job::job_world;

namespace {

struct ConvertFlags {
  std::string src;
  std::string dst;
  std::string max_shard_size = "5GB";
  std::string dtype;
  CheckpointLayoutFlags layout;
  UploadFlags upload;
  bool force = false;
  bool max_shard_size_given = false;
};

[[noreturn]] void usage(const std::string& message) { throw Error(ErrorCode::kParse, message); }

// --mesh makes a checkpoint; else a DST named *.safetensors (and not an
// existing folder) is one file; anything else is a Hugging Face folder.
ConvertOutput output_kind(const ConvertFlags& flags) {
  return convert_output_for(storage::Location::parse(flags.dst), !flags.layout.mesh.empty());
}

std::string_view output_name(ConvertOutput output) {
  switch (output) {
    case ConvertOutput::kSafetensorsFile: return "safetensors file";
    case ConvertOutput::kHfFolder: return "Hugging Face folder";
    case ConvertOutput::kCheckpoint: return "checkpoint";
  }
  return "output";
}

void convert(const ConvertFlags& flags) {
  ConvertOptions options;
  options.output = output_kind(flags);
  options.dtype = float_cast_from_flag(flags.dtype);
  options.max_shard_size = parse_byte_size(flags.max_shard_size);
  options.replace = flags.force;
  options.upload = upload_options(flags.upload);
  if (options.output != ConvertOutput::kHfFolder && flags.max_shard_size_given) {
    usage(fmt::format("--max-shard-size: the destination is a {}", output_name(options.output)));
  }
  if (options.output != ConvertOutput::kCheckpoint && (!flags.layout.rules.empty() || !flags.layout.best_effort.empty())) {
    usage("--rules and --best-effort lay out a checkpoint: give --mesh too");
  }
  if (options.output != ConvertOutput::kCheckpoint && (!flags.layout.devices.empty() || !flags.layout.num_devices.empty())) {
    usage("--devices and --num-devices describe a checkpoint's mesh: give --mesh too");
  }
  const JobWorld world = job_world();
  if (options.output == ConvertOutput::kCheckpoint) options.layout = checkpoint_layout_from_flags(flags.layout, world.size);
  Transport& transport = job_transport();
  std::optional<Progress> progress;
  if (world.rank == 0 && world.size == 1) {
    progress.emplace("converting", 0);
    options.progress = [&progress](uint64_t bytes) { progress->advance(bytes); };
  }
  const ConvertResult result =
      convert_model(storage::Location::parse(flags.src), storage::Location::parse(flags.dst), transport, options);
  if (progress) progress->finish();
  if (world.rank != 0) return;
  for (const std::string& warning : result.warnings) {
    const std::string line = "warning: " + warning + "\n";
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
  }
  std::cout << fmt::format("wrote {}: {} ({} file{}, {} tensors, {} bytes of tensor data{}{})\n", flags.dst,
                           output_name(options.output), result.files, result.files == 1 ? "" : "s", result.tensors,
                           result.bytes, result.carried.empty() ? "" : ", with ",
                           fmt::format("{}", fmt::join(result.carried, ", ")));
}

constexpr const char* kHelp =
    "Convert between a .safetensors file, a Hugging Face model folder and a reshard checkpoint.\n"
    "A DST ending in .safetensors is written as one file; with --mesh, DST is a checkpoint folder; any\n"
    "other DST is a folder split as transformers' save_pretrained splits (model-0000i-of-0000N.safetensors\n"
    "and model.safetensors.index.json, or one model.safetensors). A checkpoint SRC may be written as any\n"
    "of them; CKPT -> CKPT2 with a new --mesh is the offline 'resume on another cluster' step. The output\n"
    "appears only when complete; an existing DST is refused unless --force. Under mpirun the processes\n"
    "share the reading and the writing (each reads only what it writes, or its devices need) and one commits.\n"
    "A folder written from a folder carries its other small files (config.json, whose dtype keys follow\n"
    "--dtype, generation_config.json, the tokenizer's files, ...); one written from a checkpoint gets\n"
    "config.json and generation_config.json from the checkpoint (kept there when it was made from a\n"
    "folder). Without a config.json to carry (a single .safetensors SRC), a warning says so on stderr.\n"
    "SRC and DST may be s3://BUCKET/KEY or gs://BUCKET/KEY: a source there is read by byte ranges; a file or\n"
    "folder written there has each file uploaded in parts (--part-size) that the processes share, completed\n"
    "by process 0, then the configs and the index last; a checkpoint there appears when its manifest does.\n"
    "A failure aborts every upload: nothing is left in a destination that was empty.\n"
    "A rules file maps tensor names to specs, one rule per line, the first match winning and tensors that\n"
    "match none replicated:\n"
    "    # PATTERN (shell glob)    SPEC (as --spec; _ for replicated)\n"
    "    *.embed_tokens.weight     model,None\n"
    "    *.q_proj.weight           None,model\n"
    "    *.norm.weight             _\n"
    "Examples:\n"
    "  reshard convert model.safetensors llama-hf/ --max-shard-size 2GB\n"
    "  reshard convert llama-hf/ llama-bf16.safetensors --dtype bf16\n"
    "  mpirun -np 4 reshard convert llama-hf/ ckpt/ --mesh data=2,model=4 --rules rules.txt\n"
    "  reshard convert ckpt/ ckpt-8/ --mesh model=8 --best-effort model\n"
    "  reshard convert ckpt/ model.safetensors\n"
    "  mpirun -np 4 reshard convert s3://my-bucket/llama-hf gs://my-bucket/llama-bf16 --dtype bf16 --part-size 64MiB";

}  // namespace

void add_convert_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", kHelp);
  auto flags = std::make_shared<ConvertFlags>();
  cmd->add_option("SRC", flags->src,
                  "A .safetensors file, a Hugging Face model folder or a checkpoint: a local path, s3://BUCKET/KEY "
                  "or gs://BUCKET/KEY")
      ->required()
      ->check(storage_location());
  cmd->add_option("DST", flags->dst,
                  "A .safetensors file, a folder, or (with --mesh) a checkpoint to create: a local path, "
                  "s3://BUCKET/KEY or gs://BUCKET/KEY")
      ->required()
      ->check(storage_location());
  auto* max_shard = cmd->add_option("--max-shard-size", flags->max_shard_size,
                                    "Largest file of a folder (5GB, 500MB, 1.5GiB or bytes); a larger tensor "
                                    "gets a file of its own")
                        ->capture_default_str();
  cmd->add_option("--dtype", flags->dtype,
                  "Cast F32/F16/BF16 tensors to f32, f16 or bf16 (round to nearest even); integer, bool and "
                  "other tensors are copied unchanged");
  cmd->add_flag("--force", flags->force,
                "Replace an existing DST: a file whole; in a folder only the weight files (model*.safetensors and "
                "the index); a checkpoint at the final rename");
  add_checkpoint_layout_flags(*cmd, flags->layout, "Write a checkpoint laid out on this mesh, e.g. data=2,model=4");
  add_upload_flags(*cmd, flags->upload, "DST");
  add_timeout_option(*cmd);
  cmd->callback([flags, max_shard] {
    flags->max_shard_size_given = max_shard->count() > 0;
    convert(*flags);
  });
}

}  // namespace reshard::cli
