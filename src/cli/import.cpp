// `reshard import HF_DIR CKPT --map FILE|PRESET --mesh M ...`: a Hugging Face
// model or PEFT adapter folder into a checkpoint in a training framework's
// layout, through the map run backwards. Parses options; the import itself
// is the pipelines layer's import_checkpoint, run by every process of the job.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/checkpoint_layout_flags.h"
#include "cli/commands.h"
#include "cli/job_options.h"
#include "cli/path_checks.h"
#include "cli/progress.h"
#include "cli/upload_flags.h"
#include "job/job.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/import_model.h"
#include "reshard/pipelines/tensor_map.h"
#include "reshard/storage/location.h"

namespace reshard::cli {

using job::JobWorld;
using job::job_transport;
using job::job_world;

namespace {

struct ImportFlags {
  std::string hf_dir;
  std::string checkpoint;
  std::string map;
  std::string dtype;
  CheckpointLayoutFlags layout;
  UploadFlags upload;
  bool force = false;
};

void import_model(const ImportFlags& flags) {
  if (flags.layout.mesh.empty()) throw Error(ErrorCode::kParse, "--mesh is required: the checkpoint's layout");
  const TensorMap map = load_tensor_map(flags.map);
  const JobWorld world = job_world();
  const CheckpointLayout layout = checkpoint_layout_from_flags(flags.layout, world.size);
  ImportOptions options;
  options.dtype = float_cast_from_flag(flags.dtype);
  options.replace = flags.force;
  options.upload = upload_options(flags.upload);
  Transport& transport = job_transport();
  std::optional<Progress> progress;
  if (world.rank == 0 && world.size == 1) {
    progress.emplace("importing", 0);
    options.progress = [&progress](uint64_t bytes) { progress->advance(bytes); };
  }
  const ImportResult result = import_checkpoint(storage::Location::parse(flags.hf_dir),
                                                storage::Location::parse(flags.checkpoint), map, layout, transport,
                                                options);
  if (progress) progress->finish();
  if (world.rank != 0) return;
  std::cout << fmt::format("wrote {}: checkpoint ({} tensors, {} bytes of tensor data; process 0 of {} read {} bytes "
                           "of {})\n",
                           flags.checkpoint, result.tensors, result.bytes, world.size, result.bytes_read, flags.hf_dir);
}

constexpr const char* kHelp =
    "Import a Hugging Face model folder (model.safetensors, or an index and its files; an\n"
    "adapter_model.safetensors beside them is imported too) or a PEFT adapter folder into a reshard\n"
    "checkpoint in a training framework's layout: the map that `reshard export` takes, run backwards\n"
    "(renames undone, per-layer tensors stacked, merged axes split, transposes undone). Axis sizes that\n"
    "the shapes do not give (heads, head_dim, layers) come from the folder's config.json. Every process\n"
    "of the job reads only the bytes its devices need, straight from the memory-mapped files, builds\n"
    "each slice once with the transforms fused into the copy, and writes its part of the checkpoint;\n"
    "one commits. A tensor no rule matches, a shape that does not factor, a missing layer or a layout\n"
    "rule that does not fit is an error naming the tensor and the rule, before anything is written;\n"
    "an existing CKPT is refused unless --force, and a failed import leaves it as it was.\n"
    "HF_DIR and CKPT may be s3://BUCKET/KEY or gs://BUCKET/KEY: each process reads only the byte ranges of its\n"
    "slices; a checkpoint there has each process upload its data file in parts (--part-size) and appears when\n"
    "its manifest does.\n"
    "--rules takes a rules file on the framework's tensor names, as convert does:\n"
    "    # PATTERN (shell glob)                  SPEC (as --spec; _ for replicated)\n"
    "    embeddings.token_embeddings.weight      model,None\n"
    "    *.q_proj.weight                         None,model\n"
    "    *norm.weight                            _\n"
    "Examples:\n"
    "  reshard import llama-hf/ ckpt/ --map levanter-llama --mesh data=2,model=4 --rules rules.txt\n"
    "  mpirun -np 4 reshard import llama-hf/ ckpt/ --map levanter-llama --mesh data=4,model=4 \\\n"
    "      --devices 0,4,8,12,1,5,9,13,2,6,10,14,3,7,11,15 --best-effort model --dtype bf16\n"
    "  reshard import my-adapter/ adapter-ckpt/ --map my-map.json --mesh model=8 --best-effort model --force\n";

}  // namespace

void add_import_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("import", kHelp + tensor_map_help());
  auto flags = std::make_shared<ImportFlags>();
  cmd->add_option("HF_DIR", flags->hf_dir,
                  "A Hugging Face model folder, a PEFT adapter folder or a .safetensors file (a local path, s3:// "
                  "or gs://)")
      ->required()
      ->check(storage_location());
  cmd->add_option("CKPT", flags->checkpoint, "The checkpoint folder to create (a local path, s3:// or gs://)")
      ->required()
      ->check(storage_location());
  cmd->add_option("--map", flags->map, "A map file, or a preset's name (levanter-llama): framework to Hugging Face")
      ->required();
  add_checkpoint_layout_flags(*cmd, flags->layout, "The checkpoint's mesh, e.g. data=2,model=4 (required)");
  cmd->add_option("--dtype", flags->dtype,
                  "Cast F32/F16/BF16 tensors to f32, f16 or bf16 (round to nearest even); others are copied unchanged");
  cmd->add_flag("--force", flags->force, "Replace an existing CKPT (at the final rename)");
  add_upload_flags(*cmd, flags->upload, "CKPT");
  add_timeout_option(*cmd);
  cmd->callback([flags] { import_model(*flags); });
}

}  // namespace reshard::cli
