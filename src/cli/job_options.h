// The flags that set how a command's job runs (src/job/job.h), shared by
// every command that moves data.
#pragma once

namespace CLI {
class App;
}

namespace reshard::cli {

// Adds `--timeout SECONDS` and `--transport KIND` (every data-moving command
// takes them) to `command`.
void add_timeout_option(CLI::App& command);
// Adds `--transport auto|mpi|tcp|none` alone.
void add_transport_option(CLI::App& command);

}  // namespace reshard::cli
