// Paths and URLs from Python, as the C++ functions take them.
//
// Python hands every path over as the str os.fspath gives (never through
// pathlib, which folds "s3://b/k" into "s3:/b/k"); nanobind's path caster
// keeps its bytes as they are. A binding parses it into a Place, a
// storage::Location (a local path or an object in s3:// or gs://) whose parse
// errors name the Python argument, never a local folder named "s3:".
#pragma once

#include <filesystem>
#include <optional>

#include "reshard/storage/location.h"

namespace reshard::python {

class Place {
 public:
  // Parses `given` as Location::parse does; a scheme reshard does not read
  // (hf://, http://) or a malformed URL is Error(kInvalidArgument) naming
  // `argument` (the Python argument's name).
  Place(const std::filesystem::path& given, const char* argument);

  // NOLINTNEXTLINE(google-explicit-constructor): what a Location-taking function gets.
  operator const storage::Location&() const { return where_; }

  const storage::Location& location() const { return where_; }

 private:
  storage::Location where_;
};

// An optional path from Python as an optional Location, parse errors naming
// `argument`.
inline std::optional<storage::Location> optional_place(const std::optional<std::filesystem::path>& given,
                                                       const char* argument) {
  if (!given) return std::nullopt;
  return Place(*given, argument).location();
}

}  // namespace reshard::python
