// Reading a config text that sits beside the weights (config.json,
// adapter_config.json, ...), bounded so that a wrong path cannot load
// gigabytes, and telling whether one is there.
#pragma once

#include <string>

#include "reshard/storage/location.h"

namespace reshard::pipelines_detail {

// The whole text of `where`, a local file or an object (empty if it is).
// Error(kIo) naming it if it cannot be read, Error(kInvalidArgument) if it is
// past 10 MB.
std::string read_small_file(const storage::Location& where);

// Whether `where` is a file (an object in a store): false for a folder, a
// prefix and nothing. Store errors (unreachable, access denied) are thrown.
bool file_exists(const storage::Location& where);

}  // namespace reshard::pipelines_detail
