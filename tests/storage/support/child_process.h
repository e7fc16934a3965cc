// A helper server run by a test as a child process (a Python script from
// tests/storage/servers): started with its arguments, its output kept in a log
// file, and stopped by its process id (SIGTERM, then SIGKILL) when the object
// goes, also when the test fails.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace reshard::testing {

class ChildProcess {
 public:
  // Runs argv[0] (a path) with `argv`; stdout and stderr go to `log`.
  ChildProcess(std::vector<std::string> argv, std::filesystem::path log);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Whether it still runs (reaps it when it has ended).
  bool running();
  // Waits until the child has written the JSON file `path` (its address),
  // and returns it; throws with the log's tail when the child exits first or
  // `timeout` passes.
  nlohmann::json wait_for_json(const std::filesystem::path& path,
                               std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // The last `bytes` of the log.
  std::string log_tail(size_t bytes = 2000) const;

 private:
  void stop();

  pid_t pid_ = -1;
  std::filesystem::path log_;
};

// The project's Python (the virtual environment's) and the folder of the
// test servers' scripts, as the build was configured.
std::string test_python();
std::filesystem::path test_servers_dir();

}  // namespace reshard::testing
