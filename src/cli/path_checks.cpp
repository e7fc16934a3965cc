#include "cli/path_checks.h"

#include <fmt/format.h>

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

CLI::Validator local_path_only() {
  return CLI::Validator(
      [](std::string& text) {
        std::string problem = parse_problem(text);
        if (!problem.empty()) return problem;
        const storage::Location where = storage::Location::parse(text);
        if (where.is_local()) return std::string();
        return fmt::format("{}: this command reads and writes local files only so far "
                           "(inspect and verify read {}:// objects)",
                           text, storage::scheme_name(where.scheme()));
      },
      "PATH", "local path");
}

}  // namespace reshard::cli
