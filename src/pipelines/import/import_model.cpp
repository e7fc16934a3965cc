#include "reshard/pipelines/import_model.h"

#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "layout/checked.h"
#include "pipelines/common/agreement.h"
#include "pipelines/import/import_fill.h"
#include "pipelines/import/import_plan.h"
#include "pipelines/import/import_source.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "reshard/storage/open_store.h"

namespace reshard {

using layout_detail::checked_add;
using pipelines_detail::ResolvedMap;
using pipelines_detail::ResolvedTensor;

namespace {

namespace fs = std::filesystem;
namespace detail = pipelines_detail;

// Tensors fetched at once from an object store, each by its own ranged reads:
// enough to keep a store's connection pool busy while slices are copied.
constexpr size_t kTensorsInFlight = 8;

// Every process learns whether every step so far succeeded everywhere.
void agree(Transport& transport, const detail::Failure& failure, std::string_view what) {
  const auto reports = detail::exchange_reports(transport, {failure.message, {}});
  detail::require_all_succeeded(reports, transport.rank(), what, failure.error);
}

void check_layout_fits(const CheckpointLayout& layout, const Transport& transport) {
  if (layout.topology.num_processes() != transport.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("the layout's topology has {} processes, the job {}", layout.topology.num_processes(),
                            transport.size()));
  }
  for (const DeviceId device : layout.mesh.devices()) {
    if (device < 0 || device >= layout.topology.num_devices()) {
      throw Error(ErrorCode::kUnknownDevice, fmt::format("the mesh's device {} is not one of the topology's {} devices",
                                                         device, layout.topology.num_devices()));
    }
  }
}

safetensors::Metadata configs_as_metadata(const detail::ImportSource& source) {
  safetensors::Metadata metadata;
  if (source.config_json()) metadata.emplace_back(kHfConfigMetadataKey, *source.config_json());
  if (source.adapter_config_json()) metadata.emplace_back(kLoraConfigMetadataKey, *source.adapter_config_json());
  if (source.generation_config_json()) {
    metadata.emplace_back(kGenerationConfigMetadataKey, *source.generation_config_json());
  }
  return metadata;
}

uint64_t output_bytes(const ResolvedMap& map) {
  uint64_t total = 0;
  for (const ResolvedTensor& tensor : map.outputs) {
    const uint64_t elements = safetensors::element_count(tensor.out.shape, tensor.out.name);
    total = checked_add(total, dtype_byte_size(tensor.out.dtype, elements), "import size");
  }
  return total;
}

// An existing path that save_checkpoint would refuse, refused before reading
// (in a store: a prefix with objects under it).
void refuse_existing(const storage::Location& checkpoint, bool replace) {
  if (replace) return;
  std::error_code ec;
  const bool exists = checkpoint.is_local() ? fs::exists(checkpoint.local_path(), ec)
                                            : !storage::open_store(checkpoint)->list(checkpoint).empty();
  if (exists) throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists", checkpoint.str()));
}

}  // namespace

ImportResult import_arrays(const storage::Location& hf_dir, const TensorMap& map, const CheckpointLayout& layout,
                           Transport& transport, const ImportOptions& options) {
  const std::string what = fmt::format("importing {}", hf_dir.str());
  std::optional<detail::ImportSource> source;
  std::optional<detail::ImportPlan> plan;
  detail::Failure failure;
  // Everything that can be wrong with the folder, the map or the layout, before a byte is read.
  detail::run_step(failure, [&] {
    check_layout_fits(layout, transport);
    source.emplace(detail::ImportSource::open(hf_dir));
    plan.emplace(detail::plan_import(*source, map, layout, options));
  });
  agree(transport, failure, what);
  ImportResult result;
  detail::FillStats stats;
  detail::run_step(failure, [&] {
    std::vector<ShardedArray> arrays = detail::fill_import_tensors(*plan, *source, layout.topology, transport.rank(),
                                                                   kTensorsInFlight, stats, options.progress);
    for (size_t t = 0; t < arrays.size(); ++t) result.arrays.push_back({plan->map.outputs[t].out.name, std::move(arrays[t])});
  });
  agree(transport, failure, what);
  result.tensors = result.arrays.size();
  result.bytes = output_bytes(plan->map);
  result.bytes_read = stats.bytes_read;
  result.metadata = configs_as_metadata(*source);
  return result;
}

ImportResult import_checkpoint(const storage::Location& hf_dir, const storage::Location& checkpoint,
                               const TensorMap& map, const CheckpointLayout& layout, Transport& transport,
                               const ImportOptions& options) {
  detail::Failure failure;
  detail::run_step(failure, [&] { refuse_existing(checkpoint, options.replace); });
  agree(transport, failure, fmt::format("importing into {}", checkpoint.str()));
  ImportResult result = import_arrays(hf_dir, map, layout, transport, options);
  SaveOptions save;
  if (!result.metadata.empty()) save.metadata = result.metadata;
  save.replace = options.replace;
  save.part_bytes = options.upload.part_bytes;
  save.parts_in_flight = options.upload.parts_in_flight;
  save_checkpoint(result.arrays, checkpoint, transport, save);
  result.arrays.clear();  // saved: this process's memory is given back now
  return result;
}

}  // namespace reshard
