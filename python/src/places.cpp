#include "places.h"

#include <string>
#include <tuple>

#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include "bindings.h"
#include "reshard/layout/error.h"

namespace reshard::python {

storage::Location place(const std::filesystem::path& given, const char* argument) {
  try {
    return storage::Location::parse(given.native());
  } catch (const Error& e) {
    throw e.with_context(argument);
  }
}

void bind_places(nb::module_& m) {
  m.def("_parse_location", [](const std::filesystem::path& text, const std::string& argument) {
    const storage::Location where = place(text, argument.c_str());
    return std::make_tuple(std::string(storage::scheme_name(where.scheme())), where.bucket(), where.key());
  }, nb::arg("text"), nb::arg("argument"),
        nb::sig("def _parse_location(text: str | os.PathLike, argument: str) -> tuple[str, str, str]"),
        "(scheme, bucket, key) of a path or URL as the library parses it: ('local', '', path),\n"
        "('s3' or 'gs', BUCKET, KEY); InvalidArgumentError naming `argument` for a scheme reshard\n"
        "does not read.");
}

}  // namespace reshard::python
