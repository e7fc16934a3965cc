// Running the `reshard` binary, alone or under mpirun, from the launch tests
// (the three commands that run as one job: convert, export, import).
#pragma once

#include <filesystem>
#include <string>

namespace reshard::testing {

// A file's bytes, whole.
std::string bytes_of(const std::filesystem::path& path);

struct JobResult {
  int exit_status = -1;  // -1: killed, or not run
  std::string err;       // what it wrote on stderr
};

// `reshard ARGS` directly (ranks 0) or under `mpirun -np ranks --oversubscribe`
// (as root too), killed after 100 s so that a hang fails the test.
JobResult run_reshard_job(int ranks, const std::string& args);

}  // namespace reshard::testing
