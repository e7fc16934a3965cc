// The demo's export and import steps: the checkpoint to a PEFT adapter and to
// a merged Hugging Face model, each written by every process at once, and the
// merged model imported back into the framework layout elsewhere.
#include <fmt/format.h>

#include "demo/demo_export_checks.h"
#include "demo/demo_steps.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/checkpoint_restore.h"
#include "reshard/pipelines/export_model.h"
#include "reshard/pipelines/import_model.h"
#include "reshard/pipelines/tensor_map.h"

namespace reshard::demo {
namespace {

TensorMap levanter_llama() { return tensor_map_preset("levanter-llama").value(); }

// Export the checkpoint as `kind` into ctx.dir / `folder`; the (global) result.
ExportResult run_export(DemoContext& ctx, ExportKind kind, const char* folder, double& seconds) {
  ExportOptions options;
  options.kind = kind;
  options.replace = true;  // a second run with the same --out
  ExportResult result;
  seconds = timed(ctx.transport, [&] {
    result = export_checkpoint(ctx.dir / "checkpoint", ctx.dir / folder, levanter_llama(), ctx.transport, options);
  });
  return result;
}

std::string written_by(const ExportResult& result) {
  return fmt::format(
      "{} tensor{} in {} file{}; this process (rank 0) wrote {} of them, the others the rest, each at "
      "its final offset",
      result.tensors, result.tensors == 1 ? "" : "s", result.files, result.files == 1 ? "" : "s",
      bytes_text(result.bytes_written));
}

bool is_lora(const FrameworkTensor& t) { return t.kind == TensorKind::kLoraA || t.kind == TensorKind::kLoraB; }

}  // namespace

void export_adapter_step(DemoContext& ctx) {
  double seconds = 0;
  const ExportResult result = run_export(ctx, ExportKind::kAdapterOnly, "adapter", seconds);
  ctx.log.step("adapter",
               fmt::format("export the PEFT adapter {} (unstacked to lora_A [r, in] / lora_B [out, r] per layer)",
                           (ctx.dir / "adapter").string()),
               result.bytes, seconds);
  ctx.log.detail(written_by(result) + "; adapter_config.json from the checkpoint's metadata");
  CheckTally tally;
  const double check_seconds =
      timed(ctx.transport, [&] { tally = check_adapter_folder(ctx, ctx.dir / "adapter", "adapter"); });
  ctx.log.check("adapter", "the adapter's tensors and adapter_config.json", "", tally, check_seconds);
}

void export_merged_step(DemoContext& ctx) {
  double seconds = 0;
  const ExportResult result = run_export(ctx, ExportKind::kMergedModel, "merged", seconds);
  ctx.log.step("merged",
               fmt::format("export the merged model {} (W + (B @ A) * {} on every adapted weight, in f32, to bf16)",
                           (ctx.dir / "merged").string(), ctx.model.scaling()),
               result.bytes, seconds);
  ctx.log.detail(written_by(result) +
                 fmt::format("; {} weights merged; config.json from the checkpoint's metadata", result.merged));
  CheckTally tally;
  const double check_seconds =
      timed(ctx.transport, [&] { tally = check_model_folder(ctx, ctx.dir / "merged", true, "merged"); });
  ctx.log.check("merged", "the merged model's tensors and config.json", "", tally, check_seconds);
}

void import_step(DemoContext& ctx) {
  CheckpointLayout layout{ctx.resume_mesh, ctx.topology, {}, std::nullopt};
  for (const FrameworkTensor& t : ctx.model.tensors) {
    if (!is_lora(t)) layout.rules.push_back({t.name, framework_sharding(t, ctx.resume_mesh).spec()});
  }
  ImportResult result;
  ImportOptions options;
  options.replace = true;  // a second run with the same --out
  const double seconds = timed(ctx.transport, [&] {
    result = import_checkpoint(ctx.dir / "merged", ctx.dir / "imported", levanter_llama(), layout, ctx.transport,
                               options);
  });
  ctx.log.step("import",
               fmt::format("import the merged model back into the framework layout on mesh {}, as the checkpoint {}",
                           ctx.resume_mesh.to_string(), (ctx.dir / "imported").string()),
               result.bytes, seconds);
  ctx.log.detail(
      fmt::format("{} framework tensors restacked and their head axes split again (sizes from config.json); "
                  "each process read only the bytes its devices need",
                  result.tensors));
}

void restore_imported_step(DemoContext& ctx) {
  std::vector<RestoreTarget> targets;
  for (const FrameworkTensor& t : ctx.model.tensors) {
    if (!is_lora(t)) targets.push_back({t.name, framework_sharding(t, ctx.train_mesh), ctx.topology});
  }
  RestoreResult restored;
  const double seconds =
      timed(ctx.transport, [&] { restored = restore_checkpoint(ctx.dir / "imported", targets, ctx.transport); });
  ctx.log.step(
      "resume",
      fmt::format("restore the imported checkpoint onto the training layout, mesh {}", ctx.train_mesh.to_string()),
      sum_over_processes(ctx.transport, restored.data_bytes_read), seconds);
  check_restored(ctx, restored.arrays, ctx.train_mesh, true, "import");
}

}  // namespace reshard::demo
