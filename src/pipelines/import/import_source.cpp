#include "pipelines/import/import_source.h"

#include <fmt/format.h>

#include "pipelines/common/carried_files.h"
#include "pipelines/common/small_file.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/model_files.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {
namespace {

// The text of a config file beside the weights, if there is one. An empty
// config is refused as unreadable, as imports always have: no model has one.
std::optional<std::string> read_config(const storage::Location& where) {
  if (!file_exists(where)) return std::nullopt;
  std::string text = read_small_file(where);
  if (text.empty()) throw Error(ErrorCode::kIo, fmt::format("{}: cannot read", where.str()));
  return text;
}

}  // namespace

ImportSource ImportSource::open(const storage::Location& path) {
  ImportSource source;
  const ModelFiles model = open_model_files(path, safetensors::ReadMode::kMmap);
  std::vector<safetensors::File> files(model.catalog.files().begin(), model.catalog.files().end());
  std::vector<std::string> names;
  for (size_t f = 0; f < files.size(); ++f) names.push_back(model.catalog.file_name(f));
  source.adapter_only_ = model.format == ModelFormat::kPeft;
  if (model.format != ModelFormat::kSafetensors) {  // a folder
    // An adapter saved beside the model's weights is imported with them.
    const storage::Location adapter = path.child(kPeftAdapterFileName);
    if (!source.adapter_only_ && file_exists(adapter)) {
      files.push_back(safetensors::File::open(adapter, safetensors::ReadMode::kMmap));
      names.emplace_back(kPeftAdapterFileName);
    }
    source.config_json_ = read_config(path.child(kConfigFileName));
    source.generation_config_json_ = read_config(path.child(kGenerationConfigFileName));
    source.adapter_config_json_ = read_config(path.child(kPeftConfigFileName));
  }
  for (const safetensors::File& file : files) {
    if (file.mode() != safetensors::ReadMode::kMmap) source.has_views_ = false;  // objects have no mapping
  }
  source.catalog_ = TensorCatalog(std::move(files), std::move(names));
  for (const TensorCatalog::Entry& entry : source.catalog_.tensors()) {
    source.specs_.push_back({entry.info->name, entry.info->dtype, entry.info->shape});
  }
  return source;
}

std::span<const std::byte> ImportSource::bytes(size_t source) const {
  const TensorCatalog::Entry& entry = catalog_.tensors()[source];
  return catalog_.file_of(entry).view(*entry.info);
}

void ImportSource::read_box(size_t source, const Box& box, std::span<std::byte> out) const {
  const TensorCatalog::Entry& entry = catalog_.tensors()[source];
  catalog_.file_of(entry).read_box(*entry.info, box, out);
}

}  // namespace reshard::pipelines_detail
