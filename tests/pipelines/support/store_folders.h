// Helpers for the pipelines' object-store tests (the in-process memory store):
// a local folder copied to objects, and the uploads a failed writer may have
// left (objects read back: storage/support/object_listing.h).
#pragma once

#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "reshard/storage/location.h"

namespace reshard::testing {

// "memory://BUCKET/<unique prefix>": a folder no other test uses.
storage::Location fresh_memory_folder(std::string_view bucket);

// Uploads every file under `folder` to the same names under `prefix`.
void upload_folder(const std::filesystem::path& folder, const storage::Location& prefix);

// The uploads started and never completed or aborted for `names` under
// `prefix` (each removed as it is counted).
size_t pending_uploads(const storage::Location& prefix, std::span<const std::string> names);

}  // namespace reshard::testing
