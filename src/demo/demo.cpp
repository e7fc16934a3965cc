#include "demo/demo.h"

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "demo/demo_steps.h"
#include "job/job.h"
#include "reshard/execute/in_process_transport.h"
#include "reshard/layout/error.h"

namespace reshard::demo {

using job::JobWorld;
using job::job_json;
using job::job_timeout;
using job::job_transport;
using job::job_world;
using job::with_job_hosts;

namespace {

namespace fs = std::filesystem;

constexpr int kDevices = 16;
constexpr int kThreadProcesses = 4;

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

}  // namespace

void run_demo(const DemoOptions& options) {
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

}  // namespace reshard::demo
