// Paths and URLs from Python, as the C++ functions take them.
//
// Python hands every path over as the str os.fspath gives (never through
// pathlib, which folds "s3://b/k" into "s3:/b/k"); nanobind's path caster
// keeps its bytes as they are. A binding parses it into a Place, which gives
// each C++ function what its signature asks for:
// - `const storage::Location&`: the parsed place, a local path or an object;
// - `std::filesystem::path` (a function that reads and writes local files
//   only so far): the local path, or for an object Error(kUnsupported) naming
//   the Python argument and saying so, before anything is read or written.
// So a URL reaches each pipeline as soon as its signature takes a Location,
// and until then is refused, never taken for a local folder named "s3:".
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>

#include "reshard/storage/location.h"

namespace reshard::python {

class Place {
 public:
  // Parses `given` as Location::parse does; a scheme reshard does not read
  // (hf://, http://) or a malformed URL is Error(kInvalidArgument) naming
  // `argument` (the Python argument's name). `local_only` completes the
  // sentence a local-only function refuses an object with ("reshard
  // checkpoints are saved to local folders only so far").
  Place(const std::filesystem::path& given, const char* argument, const char* local_only);

  // NOLINTNEXTLINE(google-explicit-constructor): what a Location-taking function gets.
  operator const storage::Location&() const { return where_; }
  // NOLINTNEXTLINE(google-explicit-constructor): what a local-only function gets.
  operator std::filesystem::path() const { return local_path(); }

  const storage::Location& location() const { return where_; }
  bool is_local() const { return where_.is_local(); }
  // The local path; Error(kUnsupported) for an object.
  std::filesystem::path local_path() const;

 private:
  storage::Location where_;
  const char* argument_;
  const char* local_only_;
};

// An optional place as an options field of type std::optional<T> holds it
// (T: storage::Location, or std::filesystem::path where the field is local
// only so far).
template <typename T>
std::optional<T> place_field(const std::optional<Place>& place) {
  if (!place) return std::nullopt;
  if constexpr (std::is_same_v<T, storage::Location>) {
    return place->location();
  } else {
    return T(place->local_path());
  }
}

// An optional path from Python as an optional Place.
inline std::optional<Place> optional_place(const std::optional<std::filesystem::path>& given, const char* argument,
                                           const char* local_only) {
  if (!given) return std::nullopt;
  return Place(*given, argument, local_only);
}

}  // namespace reshard::python
