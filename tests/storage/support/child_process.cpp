#include "storage/support/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace reshard::testing {

ChildProcess::ChildProcess(std::vector<std::string> argv, std::filesystem::path log) : log_(std::move(log)) {
  std::vector<char*> args;
  for (std::string& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  const int error = posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    pid_ = -1;
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(error));
  }
}

ChildProcess::~ChildProcess() { stop(); }

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  const pid_t done = ::waitpid(pid_, &status, WNOHANG);
  if (done == pid_ || (done < 0 && errno == ECHILD)) {
    pid_ = -1;
    return false;
  }
  return true;
}

void ChildProcess::stop() {
  if (!running()) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 100 && running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (running()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

nlohmann::json ChildProcess::wait_for_json(const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::ifstream in(path);
    if (in) {
      try {
        return nlohmann::json::parse(in);
      } catch (const nlohmann::json::exception&) {
        // Written but not yet whole: look again.
      }
    }
    if (!running()) throw std::runtime_error("the helper server exited:\n" + log_tail());
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("the helper server wrote no " + path.string() + " in time:\n" + log_tail());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string ChildProcess::log_tail(size_t bytes) const {
  std::ifstream in(log_);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

std::string test_python() {
#ifdef RESHARD_STORAGE_TEST_PYTHON
  return RESHARD_STORAGE_TEST_PYTHON;
#else
  return (std::filesystem::path(__FILE__).parent_path() / "../../../.venv/bin/python").lexically_normal().string();
#endif
}

std::filesystem::path test_servers_dir() {
#ifdef RESHARD_STORAGE_TEST_SERVERS
  return RESHARD_STORAGE_TEST_SERVERS;
#else
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "servers";
#endif
}

}  // namespace reshard::testing
