// `reshard demo`: its flags; src/demo runs it.
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/job_options.h"
#include "demo/demo.h"

namespace reshard::cli {
namespace {

using demo::DemoOptions;

constexpr const char* kHelp =
    "The whole job on a small built-in model, checked bit for bit: a Llama-style model with LoRA\n"
    "adapters in a training framework's layout (the levanter-llama preset: stacked layers, separate\n"
    "head axes, LoRA A [layer, r, in], B [layer, out, r]; bf16 weights, f32 norms and factors), sharded\n"
    "over 16 devices on mesh data=4,model=4 in a TPU slice's device order 0,4,8,12,1,5,...; saved as a\n"
    "checkpoint by every process at once; restored onto mesh data=2,model=8 in natural order; exported\n"
    "as a PEFT adapter and as a merged Hugging Face model; the merged model imported back onto the\n"
    "other layout. Every tensor of every result is compared with a reference computed independently\n"
    "(index arithmetic for the renames and unstacking, W + (B @ A) * scaling in f32 rounded to bf16 for\n"
    "the merge). Run alone, the 4 processes are threads of this one; under mpirun -np 4 they are the\n"
    "MPI ranks (any count dividing 16 works). Only rank 0 prints. Exit 1 with 'error: check failed'\n"
    "when anything differs.\n"
    "\n"
    "Examples:\n"
    "  reshard demo\n"
    "  mpirun -np 4 reshard demo --out demo-files/\n"
    "  reshard demo --layers 4 --embed 256 --heads 8 --kv-heads 2 --mlp 512 --rank 16 --seed 7\n"
    "  reshard demo --lora-modules q_proj,v_proj --json\n"
    "  reshard demo --self-test-flip merged    # corrupts one bit: the check must fail (exit 1)";

struct DemoFlags {
  DemoOptions options;
  std::vector<std::string> lora_modules;
};

}  // namespace

void add_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", kHelp);
  auto flags = std::make_shared<DemoFlags>();
  DemoOptions& o = flags->options;
  cmd->add_option("--out", o.out, "Keep the files (checkpoints, adapter, merged model) in this folder; default: a "
                                  "temporary folder removed at the end");
  cmd->add_option("--seed", o.sizes.seed, "Seed of the model's values")->capture_default_str();
  cmd->add_option("--layers", o.sizes.layers, "Transformer blocks (stacked on the layer axis)")->capture_default_str();
  cmd->add_option("--embed", o.sizes.embed, "Hidden size")->capture_default_str();
  cmd->add_option("--heads", o.sizes.heads, "Attention heads (head_dim = embed / heads)")->capture_default_str();
  cmd->add_option("--kv-heads", o.sizes.kv_heads, "Key/value heads (dividing --heads)")->capture_default_str();
  cmd->add_option("--mlp", o.sizes.mlp, "MLP (intermediate) size")->capture_default_str();
  cmd->add_option("--vocab", o.sizes.vocab, "Vocabulary size")->capture_default_str();
  cmd->add_option("--rank", o.sizes.rank, "LoRA rank r")->capture_default_str();
  cmd->add_option("--alpha", o.sizes.alpha, "LoRA alpha (scaling = alpha / r)")->capture_default_str();
  cmd->add_option("--lora-modules", flags->lora_modules,
                  fmt::format("Modules with LoRA adapters, comma-separated (default: all of {})",
                              fmt::join(demo::llama_module_names(), ",")))
      ->delimiter(',');
  cmd->add_flag("--json", o.json, "Print one JSON document (steps, sizes, times, checks) instead of the account");
  cmd->add_option("--self-test-flip", o.flip,
                  "Flip one bit of the data a check reads before it compares (restore, adapter, merged or import), "
                  "to see the check fail")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(demo::kFlipSteps), std::end(demo::kFlipSteps))));
  add_timeout_option(*cmd);
  cmd->callback([flags] {
    DemoOptions options = flags->options;
    if (!flags->lora_modules.empty()) options.lora_modules = flags->lora_modules;
    demo::run_demo(options);
  });
}

}  // namespace reshard::cli
