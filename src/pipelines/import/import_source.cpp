#include "pipelines/import/import_source.h"

#include <system_error>

#include <fmt/format.h>

#include "pipelines/common/carried_files.h"
#include "pipelines/common/small_file.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/model_files.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {
namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// The text of a config file beside the weights, if there is one. An empty
// config is refused as unreadable, as imports always have: no model has one.
std::optional<std::string> read_config(const fs::path& path) {
  if (!is_file(path)) return std::nullopt;
  std::string text = read_small_file(path);
  if (text.empty()) throw Error(ErrorCode::kIo, fmt::format("{}: cannot read", path.string()));
  return text;
}

}  // namespace

ImportSource ImportSource::open(const fs::path& path) {
  ImportSource source;
  const ModelFiles model = open_model_files(path, safetensors::ReadMode::kMmap);
  std::vector<safetensors::File> files(model.catalog.files().begin(), model.catalog.files().end());
  std::vector<std::string> names;
  for (size_t f = 0; f < files.size(); ++f) names.push_back(model.catalog.file_name(f));
  source.adapter_only_ = model.format == ModelFormat::kPeft;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    // An adapter saved beside the model's weights is imported with them.
    const fs::path adapter = path / kPeftAdapterFileName;
    if (!source.adapter_only_ && is_file(adapter)) {
      files.push_back(safetensors::File::open(adapter, safetensors::ReadMode::kMmap));
      names.emplace_back(kPeftAdapterFileName);
    }
    source.config_json_ = read_config(path / kConfigFileName);
    source.generation_config_json_ = read_config(path / kGenerationConfigFileName);
    source.adapter_config_json_ = read_config(path / kPeftConfigFileName);
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

}  // namespace reshard::pipelines_detail
