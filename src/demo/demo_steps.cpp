#include "demo/demo_steps.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "demo/demo_reference.h"
#include "reshard/layout/sharding_picture.h"
#include "reshard/pipelines/checkpoint_restore.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "reshard/pipelines/export_model.h"
#include "reshard/pipelines/lora_config.h"

namespace reshard::demo {
namespace {

uint64_t flat_of(std::span<const int64_t> index, const Shape& shape) {
  uint64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * static_cast<uint64_t>(shape[d]) + static_cast<uint64_t>(index[d]);
  return flat;
}

}  // namespace

uint64_t sum_over_processes(Transport& transport, uint64_t value) {
  const auto gathered = transport.all_gather(std::as_bytes(std::span(&value, 1)));
  uint64_t total = 0;
  for (const std::vector<std::byte>& bytes : gathered) {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data(), std::min(bytes.size(), sizeof v));
    total += v;
  }
  return total;
}

namespace {

// Colour only for a person at a terminal, as `reshard show`.
bool want_color() {
  const char* term = std::getenv("TERM");
  return isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr &&
         !(term != nullptr && std::string_view(term) == "dumb");
}

std::string shape_text(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

void log_tensor_table(DemoContext& ctx) {
  size_t width = 0;
  for (const FrameworkTensor& t : ctx.model.tensors) width = std::max(width, t.name.size());
  for (const FrameworkTensor& t : ctx.model.tensors) {
    ctx.log.detail(fmt::format("{:<{}}  {:<20} {:<4}  {}", t.name, width, shape_text(t.shape()), dtype_name(t.dtype),
                               framework_sharding(t, ctx.train_mesh).spec().to_string()));
  }
}

}  // namespace

NamedSharding DemoContext::sharding(const FrameworkTensor& tensor, const Mesh& mesh) const {
  return framework_sharding(tensor, mesh);
}

void log_picture(DemoContext& ctx, const FrameworkTensor& tensor, const Mesh& mesh) {
  if (!ctx.log.speaks()) return;
  const NamedSharding sharding = framework_sharding(tensor, mesh);
  const Shape shape = tensor.shape();
  const std::optional<std::string> picture =
      draw_sharding(shape, sharding.index_domains(shape), mesh.devices(), {.color = want_color()});
  if (!picture) return;
  ctx.log.picture(fmt::format("{} {} {}, {} on mesh {}:", tensor.name, shape_text(shape), dtype_name(tensor.dtype),
                              sharding.spec().to_string(), mesh.to_string()),
                  *picture);
}

std::vector<NamedArray> build_step(DemoContext& ctx) {
  const DemoModel& model = ctx.model;
  std::vector<NamedArray> arrays;
  const double seconds = timed(ctx.transport, [&] {
    for (const FrameworkTensor& t : model.tensors) {
      const Shape shape = t.shape();
      const ElementFunction element = [&](std::span<const int64_t> index, std::span<std::byte> out) {
        const uint32_t bits = element_bits(model, t, flat_of(index, shape));
        std::memcpy(out.data(), &bits, out.size());
      };
      arrays.push_back({t.name, ShardedArray::from_function(shape, t.dtype, framework_sharding(t, ctx.train_mesh),
                                                            ctx.topology, ctx.transport.rank(), element)});
    }
  });
  ctx.log.step("build",
               fmt::format("build the model's {} tensors in the framework layout (preset levanter-llama) on mesh {}",
                           model.tensors.size(), ctx.train_mesh.to_string()),
               model.bytes(), seconds);
  log_tensor_table(ctx);
  log_picture(ctx, model.tensors.front(), ctx.train_mesh);
  return arrays;
}

void save_step(DemoContext& ctx, const std::vector<NamedArray>& arrays) {
  SaveOptions options;
  options.replace = true;  // a second run with the same --out
  options.metadata =
      safetensors::Metadata{{std::string(kHfConfigMetadataKey), hf_config_json(ctx.model)},
                            {std::string(kLoraConfigMetadataKey), lora_config_json(demo_lora_config(ctx.model))}};
  SaveResult stats;
  const std::filesystem::path path = ctx.dir / "checkpoint";
  const double seconds = timed(ctx.transport, [&] { stats = save_checkpoint(arrays, path, ctx.transport, options); });
  const uint64_t written = sum_over_processes(ctx.transport, stats.bytes_written);
  const uint64_t chunks = sum_over_processes(ctx.transport, stats.chunks_written);
  ctx.log.step("save", fmt::format("save the checkpoint {} from every process at once", path.string()), written,
               seconds);
  ctx.log.detail(
      fmt::format("{} chunks written by {} process{}, each chunk once (by one of its holders, replicas "
                  "not repeated); config.json and adapter_config.json in the checkpoint's metadata",
                  chunks, ctx.transport.size(), ctx.transport.size() == 1 ? "" : "es"));
}

void flip_first_bit(NamedArray& array) {
  for (size_t i = 0; i < array.array.shards().size(); ++i) {
    if (array.array.shards()[i].buffer.size() == 0) continue;
    array.array.writable_bytes(i)[0] ^= std::byte{1};
    return;
  }
}

CheckTally check_restored(DemoContext& ctx, std::vector<NamedArray>& restored, const Mesh& mesh, bool merged,
                          std::string_view flip) {
  if (ctx.flips(flip) && !restored.empty()) flip_first_bit(restored.front());
  CheckTally local;
  const double seconds = timed(ctx.transport, [&] {
    for (const NamedArray& array : restored) {
      const auto it = std::find_if(ctx.model.tensors.begin(), ctx.model.tensors.end(),
                                   [&](const FrameworkTensor& t) { return t.name == array.name; });
      if (it == ctx.model.tensors.end()) {
        local.fail([&] { return fmt::format("tensor {} is not one of the model's", array.name); });
        continue;
      }
      const FrameworkTensor& t = *it;
      check_shards(
          array.name, array.array,
          [&](uint64_t flat) {
            return merged ? merged_framework_bits(ctx.model, t, flat) : element_bits(ctx.model, t, flat);
          },
          local);
    }
  });
  const std::string what =
      fmt::format("{} on mesh {}", merged ? "the imported merged model" : "the restored checkpoint", mesh.to_string());
  CheckTally total = agree_on_check(local, ctx.transport, what);
  total.tensors = restored.size();  // each process counted the tensors it holds part of
  ctx.log.check(std::string(flip), what, ", on every device that holds a copy", total, seconds);
  return total;
}

void restore_step(DemoContext& ctx) {
  std::vector<RestoreTarget> targets;
  for (const FrameworkTensor& t : ctx.model.tensors) {
    targets.push_back({t.name, framework_sharding(t, ctx.resume_mesh), ctx.topology});
  }
  RestoreResult restored;
  const std::filesystem::path path = ctx.dir / "checkpoint";
  const double seconds = timed(ctx.transport, [&] { restored = restore_checkpoint(path, targets, ctx.transport); });
  const uint64_t read = sum_over_processes(ctx.transport, restored.data_bytes_read);
  ctx.log.step("restore",
               fmt::format("restore it onto another cluster shape: mesh {} in natural device order",
                           ctx.resume_mesh.to_string()),
               read, seconds);
  ctx.log.detail(fmt::format("each process read only the chunks its devices need ({} in all), checksums verified",
                             bytes_text(read)));
  log_picture(ctx, ctx.model.tensors.front(), ctx.resume_mesh);
  check_restored(ctx, restored.arrays, ctx.resume_mesh, false, "restore");
}

}  // namespace reshard::demo
