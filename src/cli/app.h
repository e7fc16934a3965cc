// The `reshard` command line: builds the app, runs it, maps errors to exit codes.
#pragma once

namespace reshard::cli {

// Exit codes: 0 done, 1 the operation failed (bad input, I/O, a peer), 2 the
// command line itself is wrong (usage); `reshard --help` says the same.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// Runs `reshard` with the given arguments and returns the process exit code.
// Errors go to stderr as "error: ...".
int run(int argc, char** argv);

}  // namespace reshard::cli
