#include "cli/support/run_reshard.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace reshard::testing {
namespace {

// Applies `limits` to this process for its lifetime, so that a child spawned
// meanwhile inherits them (rlimits and ignored signals survive exec).
class ScopedLimits {
 public:
  explicit ScopedLimits(const RunLimits& limits) : active_(limits.max_file_bytes.has_value()) {
    if (!active_) return;
    ::getrlimit(RLIMIT_FSIZE, &saved_limit_);
    rlimit limit = saved_limit_;
    limit.rlim_cur = static_cast<rlim_t>(*limits.max_file_bytes);
    ::setrlimit(RLIMIT_FSIZE, &limit);
    saved_handler_ = std::signal(SIGXFSZ, SIG_IGN);
  }
  ~ScopedLimits() {
    if (!active_) return;
    ::setrlimit(RLIMIT_FSIZE, &saved_limit_);
    std::signal(SIGXFSZ, saved_handler_);
  }
  ScopedLimits(const ScopedLimits&) = delete;
  ScopedLimits& operator=(const ScopedLimits&) = delete;

 private:
  bool active_;
  rlimit saved_limit_{};
  void (*saved_handler_)(int) = SIG_DFL;
};

}  // namespace

CommandResult run_reshard(const std::vector<std::string>& args, const RunLimits& limits) {
  const TempFolder scratch;
  const std::string out_path = (scratch / "stdout").string();
  const std::string err_path = (scratch / "stderr").string();

  std::vector<std::string> argv_storage;
  std::vector<char*> argv = reshard_argv(args, argv_storage);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  int spawned = 0;
  {
    const ScopedLimits scoped(limits);
    spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  }
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw std::runtime_error(std::string("cannot run ") + RESHARD_BINARY);

  CommandResult result;
  result.exit_code = wait_for_exit(pid);
  result.out = read_bytes(out_path);
  result.err = read_bytes(err_path);
  return result;
}

int wait_for_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid failed");
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<char*> reshard_argv(const std::vector<std::string>& args, std::vector<std::string>& storage) {
  storage = {RESHARD_BINARY};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return argv;
}

TempFolder::TempFolder() {
  std::string pattern = (std::filesystem::temp_directory_path() / "reshard-cli-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempFolder::~TempFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

long peak_rss_kib(const std::vector<std::string>& args) {
  std::vector<std::string> storage;
  std::vector<char*> argv = reshard_argv(args, storage);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) return -1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return usage.ru_maxrss;
}

}  // namespace reshard::testing
