// Reading a config text that sits beside the weights (config.json,
// adapter_config.json, ...), bounded so that a wrong path cannot load gigabytes.
#pragma once

#include <filesystem>
#include <string>

namespace reshard::pipelines_detail {

// The whole text of `path` (empty if the file is). Error(kIo) naming the file
// if it cannot be read, Error(kInvalidArgument) if it is past 10 MB.
std::string read_small_file(const std::filesystem::path& path);

}  // namespace reshard::pipelines_detail
