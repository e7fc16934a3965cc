// Reading a config text that sits beside the weights (config.json,
// adapter_config.json, ...), bounded so that a wrong path cannot load gigabytes.
#pragma once

#include <string>

#include "reshard/storage/location.h"

namespace reshard::pipelines_detail {

// The whole text of `where`, a local file or an object (empty if it is).
// Error(kIo) naming it if it cannot be read, Error(kInvalidArgument) if it is
// past 10 MB.
std::string read_small_file(const storage::Location& where);

}  // namespace reshard::pipelines_detail
