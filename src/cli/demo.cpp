// `reshard demo`: the whole story on a small built-in model, checked bit for
// bit: a Llama with LoRA adapters sharded over 16 devices in a TPU slice's
// order, saved, restored on another cluster shape, exported to Hugging Face
// and PEFT files, merged, and imported back.
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/demo/demo_steps.h"
#include "cli/job_options.h"
#include "job/job.h"
#include "reshard/execute/in_process_transport.h"
#include "reshard/layout/error.h"

namespace reshard::cli {
namespace {

namespace fs = std::filesystem;
using namespace demo;

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

constexpr int kDevices = 16;
constexpr int kThreadProcesses = 4;

struct DemoFlags {
  DemoOptions options;
  std::vector<std::string> lora_modules;
};

Mesh train_mesh() {
  return Mesh({{"data", 4}, {"model", 4}}, {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15});
}

Mesh resume_mesh() { return Mesh::with_default_order({{"data", 2}, {"model", 8}}); }

// Rank 0's choice of folder, the same on every process: --out, or a fresh
// temporary one.
fs::path agree_on_dir(const DemoOptions& options, Transport& transport) {
  std::string path;
  if (transport.rank() == 0) {
    if (!options.out.empty()) {
      fs::create_directories(options.out);
      path = fs::absolute(options.out).string();
    } else {
      std::string pattern = (fs::temp_directory_path() / "reshard-demo-XXXXXX").string();
      if (mkdtemp(pattern.data()) == nullptr) {
        throw Error(ErrorCode::kIo, fmt::format("cannot create a temporary folder {}", pattern));
      }
      path = pattern;
    }
  }
  const auto gathered = transport.all_gather(std::as_bytes(std::span(path.data(), path.size())));
  return std::string(reinterpret_cast<const char*>(gathered[0].data()), gathered[0].size());
}

void log_introduction(DemoContext& ctx, const std::string& processes) {
  const ModelSizes& s = ctx.model.sizes;
  std::vector<std::string> adapted;
  for (const Module& m : ctx.model.modules) {
    if (m.adapted) adapted.push_back(m.short_name());
  }
  ctx.log.line("reshard demo: a Llama-style model with LoRA adapters, from a sharded training layout to Hugging "
               "Face files and back");
  ctx.log.line(fmt::format("  model: {} layers, embed {}, {} heads ({} key/value heads, head_dim {}), mlp {}, vocab "
                           "{}: {} in {} tensors (seed {})",
                           s.layers, s.embed, s.heads, s.kv_heads, s.head_dim(), s.mlp, s.vocab,
                           bytes_text(ctx.model.bytes()), ctx.model.tensors.size(), s.seed));
  ctx.log.line(fmt::format("  LoRA: r {}, alpha {} (scaling {}) on {}", s.rank, s.alpha, ctx.model.scaling(),
                           adapted.empty() ? "no module" : fmt::format("{}", fmt::join(adapted, ", "))));
  ctx.log.line(fmt::format("  job: {} devices in {} processes ({}), {} devices each", kDevices, ctx.transport.size(),
                           processes, kDevices / ctx.transport.size()));
  ctx.log.line(fmt::format("  files: {}{}", ctx.dir.string(), ctx.options.out.empty() ? " (removed at the end)" : ""));
  nlohmann::ordered_json model = {{"layers", s.layers}, {"embed", s.embed},   {"heads", s.heads},
                                  {"kv_heads", s.kv_heads}, {"mlp", s.mlp},   {"vocab", s.vocab},
                                  {"lora_r", s.rank},       {"lora_alpha", s.alpha}, {"lora_modules", adapted},
                                  {"seed", s.seed},         {"tensors", ctx.model.tensors.size()},
                                  {"bytes", ctx.model.bytes()}};
  ctx.log.field("model", std::move(model));
  ctx.log.field("processes", ctx.transport.size());
  ctx.log.field("devices", kDevices);
  ctx.log.field("job", job_json());
  ctx.log.field("out", ctx.options.out.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(ctx.dir.string()));
}

// The demo's steps in order, each collective.
using Step = std::function<void(DemoContext&)>;
std::vector<Step> demo_steps() {
  return {
      [](DemoContext& ctx) {
        const std::vector<NamedArray> arrays = build_step(ctx);
        save_step(ctx, arrays);
      },
      restore_step,
      export_adapter_step,
      export_merged_step,
      import_step,
      restore_imported_step,
  };
}
constexpr int kLoggedSteps = 7;  // build, save, restore, adapter, merged, import, resume

// One process of the job: the whole demo, collectively.
void run_demo_process(const DemoModel& model, const DemoOptions& options, Transport& transport,
                      const std::string& processes) {
  DemoLog log(transport.rank() == 0, options.json, kLoggedSteps);
  const fs::path dir = agree_on_dir(options, transport);
  const bool temporary = options.out.empty();
  DemoContext ctx{model, options, transport, log, dir, with_job_hosts(Topology::uniform(kDevices, transport.size())),
                  train_mesh(),
                  resume_mesh()};
  try {
    log_introduction(ctx, processes);
    for (const Step& step : demo_steps()) step(ctx);
    transport.barrier();
  } catch (...) {
    std::error_code ec;
    if (temporary && transport.rank() == 0) fs::remove_all(dir, ec);  // best effort: the error is what matters
    throw;
  }
  if (temporary && transport.rank() == 0) fs::remove_all(dir);
  log.finish(fmt::format("ok: every tensor of every step equals the reference bit for bit{}",
                         temporary ? "" : fmt::format("; the files are in {}", dir.string())));
}

void run_demo(const DemoFlags& flags) {
  DemoOptions options = flags.options;
  if (!flags.lora_modules.empty()) options.lora_modules = flags.lora_modules;
  const DemoModel model = make_demo_model(options.sizes, options.lora_modules);
  const JobWorld world = job_world();
  if (world.size > 1) {
    if (kDevices % world.size != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("the demo's {} devices cannot be shared by {} processes: use a count that divides {}",
                              kDevices, world.size, kDevices));
    }
    run_demo_process(model, options, job_transport(), "MPI ranks");
    return;
  }
  // No launcher: the demo's processes are threads of this one.
  InProcessGroup group(kThreadProcesses, job_timeout());
  group.run([&](Transport& transport) {
    run_demo_process(model, options, transport, "threads of this one");
  });
}

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
                              fmt::join(llama_module_names(), ",")))
      ->delimiter(',');
  cmd->add_flag("--json", o.json, "Print one JSON document (steps, sizes, times, checks) instead of the account");
  cmd->add_option("--self-test-flip", o.flip,
                  "Flip one bit of the data a check reads before it compares (restore, adapter, merged or import), "
                  "to see the check fail")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kFlipSteps), std::end(kFlipSteps))));
  add_timeout_option(*cmd);
  cmd->callback([flags] { run_demo(*flags); });
}

}  // namespace reshard::cli
