// The flags of commands that may write to an object store: --part-size and
// --parts-in-flight, as export takes them, for the stores' parallel uploads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "reshard/storage/object_writer.h"

namespace reshard::cli {

struct UploadFlags {
  std::string part_size;  // empty: the store's default
  uint32_t parts_in_flight = 4;
};

// Adds both flags; `destination` names what they apply to ("DST", "OUT").
void add_upload_flags(CLI::App& command, UploadFlags& flags, std::string_view destination);

// The options they give (Error(kParse) for a size that is not one).
storage::UploadOptions upload_options(const UploadFlags& flags);

}  // namespace reshard::cli
