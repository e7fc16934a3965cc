// Runs the built `reshard` binary with its stdout on a pseudo-terminal, to see
// what a person at a terminal sees (colour, progress) rather than a pipe.
#pragma once

#include <string>
#include <vector>

#include "cli/support/run_reshard.h"

namespace reshard::testing {

// Like run_reshard, but stdout (only) is a terminal; `out` holds what the
// terminal received, with the line discipline's "\r\n" turned back into "\n".
CommandResult run_reshard_on_terminal(const std::vector<std::string>& args);

}  // namespace reshard::testing
