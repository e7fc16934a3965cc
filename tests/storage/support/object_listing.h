// A folder or a prefix of objects as one map, name to bytes: what the tests
// compare an upload with the local files the same command writes.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "reshard/storage/location.h"

namespace reshard::testing {

// Every object under `prefix` (names relative to it, '/' between parts), read
// with the store's own driver.
std::map<std::string, std::string> objects_under(const storage::Location& prefix);

// Every regular file under `folder`, by relative name, with its bytes.
std::map<std::string, std::string> files_under(const std::filesystem::path& folder);

}  // namespace reshard::testing
