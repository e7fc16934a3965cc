// The `reshard` command line: builds the app, runs it, maps errors to exit codes.
#pragma once

namespace reshard::cli {

// Exit codes of spec/cli.md.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// Runs `reshard` with the given arguments and returns the process exit code.
// Errors go to stderr as "error: ...".
int run(int argc, char** argv);

}  // namespace reshard::cli
