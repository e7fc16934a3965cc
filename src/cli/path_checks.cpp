#include "cli/path_checks.h"

#include <string>

#include "reshard/layout/error.h"
#include "reshard/storage/location.h"

namespace reshard::cli {
namespace {

// The parse error's text, or nothing when `text` parses.
std::string parse_problem(const std::string& text) {
  try {
    (void)storage::Location::parse(text);
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace

CLI::Validator storage_location() {
  return CLI::Validator([](std::string& text) { return parse_problem(text); }, "PATH|URL", "storage location");
}

}  // namespace reshard::cli
