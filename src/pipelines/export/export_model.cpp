#include "reshard/pipelines/export_model.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "pipelines/common/agreement.h"
#include "pipelines/common/carried_files.h"
#include "pipelines/export/base_input.h"
#include "pipelines/export/export_blocks.h"
#include "pipelines/export/export_inputs.h"
#include "pipelines/export/export_objects.h"
#include "pipelines/export/export_output.h"
#include "pipelines/export/export_plan.h"
#include "pipelines/export/export_produce.h"
#include "pipelines/export/export_run.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
namespace detail = pipelines_detail;

void check_options(const ExportOptions& options, const Transport& transport) {
  if (options.gather_to && (*options.gather_to < 0 || *options.gather_to >= transport.size())) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("gather to process {}: the job has processes 0..{}",
                                                         *options.gather_to, transport.size() - 1));
  }
  if (options.block_bytes == 0) throw Error(ErrorCode::kInvalidArgument, "export block size must be positive");
  if (options.blocks_in_flight == 0) throw Error(ErrorCode::kInvalidArgument, "export blocks in flight must be positive");
}

// Runs `step` on every process and fails all of them if it fails on any.
template <typename Step>
void agreed_step(Transport& transport, std::string_view what, Step&& step) {
  detail::Failure failure;
  detail::run_step(failure, step);
  const auto reports = detail::exchange_reports(transport, {failure.message, {}});
  detail::require_all_succeeded(reports, transport.rank(), what, failure.error);
}

std::optional<std::string> metadata_value(const std::optional<safetensors::Metadata>& metadata, std::string_view key) {
  if (!metadata) return std::nullopt;
  for (const auto& [name, value] : *metadata) {
    if (name == key) return value;
  }
  return std::nullopt;
}

bool readable(const detail::ExportPlan& plan, const detail::ExportInput& input, int process,
              const detail::ExportBlock& block) {
  const auto sources = detail::block_sources(plan, plan.tensors[block.tensor], block.box);
  return std::all_of(sources.begin(), sources.end(),
                     [&](const auto& source) { return input.readable_by(process, source.first, source.second); });
}

// The arrays each tensor needs brought whole to one process: those of the
// tensors whose blocks no process can produce from its own shards (sources
// from `arrays` on are a base model's, read anywhere).
std::vector<std::vector<std::pair<size_t, int>>> place_unplaced(const detail::ExportPlan& plan,
                                                                std::vector<detail::ExportBlock>& blocks,
                                                                int processes, size_t arrays) {
  std::vector<std::vector<std::pair<size_t, int>>> bring(plan.tensors.size());
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    const bool unplaced = std::any_of(blocks.begin(), blocks.end(),
                                      [&](const auto& block) { return block.tensor == t && block.process < 0; });
    if (!unplaced) continue;
    const int root = detail::assign_unplaced(blocks, t, processes);
    const safetensors::TensorSpec& spec = plan.tensors[t].spec;
    std::set<size_t> sources;
    for (const auto& [source, box] :
         detail::block_sources(plan, plan.tensors[t], Box::whole(safetensors::layout_shape(spec.shape, spec.name)))) {
      if (source < arrays) sources.insert(source);
    }
    for (const size_t source : sources) bring[t].emplace_back(source, root);
  }
  return bring;
}

// The blocks of an export whose every process reads any source box (a
// checkpoint folder, a tensor source), balanced by bytes over `processes`.
std::vector<detail::ExportBlock> cut_read_anywhere(const detail::ExportPlan& plan, const storage::Location& out,
                                                   const ExportOptions& options, int processes) {
  const auto anyone = [](int, const auto&) { return true; };
  if (out.is_local()) return detail::cut_blocks(plan, options.block_bytes, processes, anyone);
  // Cut along the parts, so that each part is produced where it is uploaded
  // and nothing moves between processes.
  const detail::OutputFiles files = detail::plan_output_files(plan, options.max_shard_size);
  return detail::cut_blocks_by_parts(plan, files, detail::ExportObjects::plan_parts(out, files, options.part_bytes),
                                     options.block_bytes, processes, anyone);
}

// The input a plan is made from and the blocks read: the source's own, or,
// for a merge into a base model (options.base), the source's followed by
// the base's tensors.
class PlannedInput {
 public:
  // Opens the base model where the options merge into one; the base's
  // config files win over the source's metadata (the merged folder is the
  // base model, changed).
  PlannedInput(const detail::ExportInput& source, const ExportOptions& options, detail::ExportConfigs& configs)
      : source_(source) {
    if (options.kind != ExportKind::kMergedModel || !options.base) return;
    base_.emplace(source, *options.base);
    if (auto config = base_->base_file(detail::kConfigFileName)) configs.hf_config = std::move(config);
    if (auto generation = base_->base_file(detail::kGenerationConfigFileName)) {
      configs.generation_config = std::move(generation);
    }
  }
  const detail::ExportInput& input() const { return base_ ? static_cast<const detail::ExportInput&>(*base_) : source_; }
  const detail::MergeBase* merge_base() const { return base_ ? &base_->merge_base() : nullptr; }

 private:
  const detail::ExportInput& source_;
  std::optional<detail::BaseModelInput> base_;
};

}  // namespace

namespace {

// An export whose every process can read any source box: `open` makes the
// input in `input` and returns the configs it falls back on (on every
// process, agreed), the blocks are cut for the output, and the run begins.
template <typename Input, typename Open>
ExportResult export_read_anywhere(std::string_view what, const storage::Location& out, const TensorMap& map,
                                  Transport& transport, const ExportOptions& options, Open&& open) {
  check_options(options, transport);
  std::optional<Input> input;
  std::optional<PlannedInput> planned;
  detail::ExportPlan plan;
  std::vector<detail::ExportBlock> blocks;
  agreed_step(transport, what, [&] {
    detail::ExportConfigs configs = open(input);
    planned.emplace(*input, options, configs);
    plan = detail::plan_export(input->specs(), map, options, configs, planned->merge_base());
    blocks = cut_read_anywhere(plan, out, options, transport.size());
  });
  return detail::run_export(plan, blocks, planned->input(), out, options, transport);
}

}  // namespace

ExportResult export_checkpoint(const storage::Location& checkpoint, const storage::Location& out, const TensorMap& map,
                               Transport& transport, const ExportOptions& options) {
  const auto open = [&](std::optional<detail::CheckpointInput>& input) {
    input.emplace(checkpoint::Reader::open(checkpoint));
    const auto& metadata = input->reader().manifest().metadata;
    return detail::ExportConfigs{metadata_value(metadata, kHfConfigMetadataKey),
                                 metadata_value(metadata, kLoraConfigMetadataKey),
                                 fmt::format("checkpoint {}", checkpoint.str()),
                                 metadata_value(metadata, kGenerationConfigMetadataKey)};
  };
  return export_read_anywhere<detail::CheckpointInput>(fmt::format("exporting {}", checkpoint.str()), out, map,
                                                       transport, options, open);
}

ExportResult export_source(const TensorSource& source, const storage::Location& out, const TensorMap& map,
                           Transport& transport, const ExportOptions& options) {
  const auto open = [&](std::optional<detail::SourceInput>& input) {
    input.emplace(source);
    return detail::ExportConfigs{std::nullopt, std::nullopt, "the tensor source", std::nullopt};
  };
  return export_read_anywhere<detail::SourceInput>("exporting a tensor source", out, map, transport, options, open);
}

ExportResult export_arrays(std::span<const NamedArray> arrays, const storage::Location& out, const TensorMap& map,
                           Transport& transport, const ExportOptions& options) {
  check_options(options, transport);
  for (const NamedArray& array : arrays) {
    if (array.array.topology().num_processes() != transport.size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("array '{}': its topology has {} processes, the job {}", array.name,
                              array.array.topology().num_processes(), transport.size()));
    }
  }
  std::optional<detail::ArraysInput> input;
  std::optional<PlannedInput> planned;
  detail::ExportPlan plan;
  std::vector<detail::ExportBlock> blocks;
  std::vector<std::vector<std::pair<size_t, int>>> bring;
  agreed_step(transport, "exporting arrays", [&] {
    input.emplace(arrays, transport.rank());
    detail::ExportConfigs configs{std::nullopt, std::nullopt, "the arrays", std::nullopt};
    planned.emplace(*input, options, configs);
    plan = detail::plan_export(input->specs(), map, options, configs, planned->merge_base());
    blocks = detail::cut_blocks(plan, options.block_bytes, transport.size(), [&](int process, const auto& block) {
      return readable(plan, planned->input(), process, block);
    });
    bring = place_unplaced(plan, blocks, transport.size(), arrays.size());
  });
  detail::ExportSteps steps;
  std::set<std::pair<size_t, int>> whole;  // arrays brought whole, and where
  steps.before = [&](size_t t) {
    for (const auto& entry : bring[t]) {
      if (whole.insert(entry).second) input->bring_whole(entry.first, entry.second, transport);
    }
  };
  steps.after = [&](size_t t) {
    for (const auto& entry : bring[t]) {
      const bool next_needs = t + 1 < bring.size() && std::find(bring[t + 1].begin(), bring[t + 1].end(), entry) != bring[t + 1].end();
      if (next_needs) continue;
      input->release(entry.first);
      whole.erase(entry);
    }
  };
  return detail::run_export(plan, blocks, planned->input(), out, options, transport, steps);
}

}  // namespace reshard
