// The configs a Hugging Face folder written by convert gets beside its
// weights, and the checkpoint metadata that keeps them: a checkpoint made from
// a folder holds its config.json and generation_config.json as metadata
// texts, and a folder made from a checkpoint gets them back as files.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipelines/import/convert_source.h"
#include "reshard/formats/safetensors_header.h"
#include "reshard/layout/dtype.h"
#include "reshard/storage/location.h"

namespace reshard::pipelines_detail {

// `metadata` without the config texts a checkpoint keeps there (a folder's
// weight files do not carry them: they become files of their own).
std::optional<safetensors::Metadata> without_configs(std::optional<safetensors::Metadata> metadata);

// The value of `key` in `metadata`, if there is one.
std::optional<std::string> metadata_text(const std::optional<safetensors::Metadata>& metadata, std::string_view key);

// Writes config.json and generation_config.json from a checkpoint's metadata
// into the folder `into` (config.json's dtype keys set to `dtype` when given;
// `src` names the checkpoint in errors); returns the names written.
std::vector<std::string> write_configs_from_metadata(const std::optional<safetensors::Metadata>& metadata,
                                                     const storage::Location& into, std::optional<DType> dtype,
                                                     const storage::Location& src);

// Why the folder made from `source` (at `src`) will lack a config.json, if it will.
std::vector<std::string> config_warnings(const ConvertSource& source, const storage::Location& src);

// Adds the config files of the folder `src` (none for a lone file) to
// `metadata`, for a checkpoint made from it; texts already there win.
void add_folder_configs(std::optional<safetensors::Metadata>& metadata, const storage::Location& src);

}  // namespace reshard::pipelines_detail
