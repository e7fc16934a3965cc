// Checks on the paths and URLs the commands take, run while the command line
// is parsed: a scheme reshard does not read (hf://, http://, file://HOST/) or a
// malformed URL is a usage error naming it, never a local folder named "s3:".
#pragma once

#include <CLI/CLI.hpp>

namespace reshard::cli {

// A local path or an object in a store reshard reads (s3://, gs://).
CLI::Validator storage_location();

}  // namespace reshard::cli
