#include "pipelines/import/convert_configs.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include <fmt/format.h>

#include "formats/atomic_file.h"
#include "pipelines/common/carried_files.h"
#include "pipelines/common/hf_config_dtype.h"
#include "pipelines/common/small_file.h"
#include "reshard/pipelines/export_model.h"

namespace reshard::pipelines_detail {

using formats_detail::write_file_atomically;

namespace {

// The checkpoint metadata keys that hold a model folder's config files, and their file names.
constexpr std::pair<std::string_view, std::string_view> kConfigKeys[] = {
    {kHfConfigMetadataKey, kConfigFileName}, {kGenerationConfigMetadataKey, kGenerationConfigFileName}};

bool is_config_key(const std::string& key) {
  return std::any_of(std::begin(kConfigKeys), std::end(kConfigKeys), [&](const auto& k) { return key == k.first; });
}

}  // namespace

std::optional<safetensors::Metadata> without_configs(std::optional<safetensors::Metadata> metadata) {
  if (!metadata) return metadata;
  std::erase_if(*metadata, [](const auto& entry) { return is_config_key(entry.first); });
  return metadata;
}

std::optional<std::string> metadata_text(const std::optional<safetensors::Metadata>& metadata, std::string_view key) {
  if (!metadata) return std::nullopt;
  for (const auto& [k, v] : *metadata) {
    if (k == key) return v;
  }
  return std::nullopt;
}

std::vector<std::string> write_configs_from_metadata(const std::optional<safetensors::Metadata>& metadata,
                                                     const storage::Location& into, std::optional<DType> dtype,
                                                     const storage::Location& src) {
  std::vector<std::string> written;
  for (const auto& [key, name] : kConfigKeys) {
    std::optional<std::string> text = metadata_text(metadata, key);
    if (!text) continue;
    if (name == kConfigFileName && dtype) {
      text = with_config_dtype(*text, *dtype, fmt::format("{} (metadata '{}')", src.str(), key));
    }
    write_file_atomically(into.child(name), *text);
    written.emplace_back(name);
  }
  return written;
}

std::vector<std::string> config_warnings(const ConvertSource& source, const storage::Location& src) {
  if (source.is_single_safetensors_file()) {
    return {fmt::format("{} is a single .safetensors file: the folder gets no config.json or generation_config.json "
                        "(transformers' from_pretrained needs a config.json beside the weights)",
                        src.str())};
  }
  if (source.is_checkpoint() ? !metadata_text(source.metadata(), kHfConfigMetadataKey).has_value()
                             : !file_exists(src.child(kConfigFileName))) {
    return {fmt::format("{} has no config.json{}: the folder gets none (transformers' from_pretrained needs one)",
                        src.str(), source.is_checkpoint() ? " in its metadata" : "")};
  }
  return {};
}

void add_folder_configs(std::optional<safetensors::Metadata>& metadata, const storage::Location& src) {
  if (file_exists(src)) return;  // a lone .safetensors file has no configs beside it
  for (const auto& [key, name] : kConfigKeys) {
    if (metadata_text(metadata, key) || !file_exists(src.child(name))) continue;
    if (!metadata) metadata.emplace();
    metadata->emplace_back(std::string(key), read_small_file(src.child(name)));
  }
}

}  // namespace reshard::pipelines_detail
