// Paths and URLs from Python, as the C++ functions take them.
//
// Python hands every path over as the str os.fspath gives (never through
// pathlib, which folds "s3://b/k" into "s3:/b/k"); nanobind's path caster
// keeps its bytes as they are. A binding parses it with place() into a
// storage::Location (a local path or an object in s3:// or gs://) whose parse
// errors name the Python argument, never a local folder named "s3:".
#pragma once

#include <filesystem>
#include <optional>

#include "reshard/storage/location.h"

namespace reshard::python {

// Parses `given` as Location::parse does; a scheme reshard does not read
// (hf://, http://) or a malformed URL is Error(kInvalidArgument) naming
// `argument` (the Python argument's name).
storage::Location place(const std::filesystem::path& given, const char* argument);

// An optional path from Python as an optional Location, parse errors naming
// `argument`.
inline std::optional<storage::Location> optional_place(const std::optional<std::filesystem::path>& given,
                                                       const char* argument) {
  if (!given) return std::nullopt;
  return place(*given, argument);
}

}  // namespace reshard::python
