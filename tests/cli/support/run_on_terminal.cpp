#include "cli/support/run_on_terminal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

extern char** environ;

namespace reshard::testing {
namespace {

std::string without_carriage_returns(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    out += text[i];
  }
  return out;
}

std::string read_all(int fd) {
  std::string out;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return out;  // EOF, or EIO once the child has closed the terminal
    }
  }
}

}  // namespace

CommandResult run_reshard_on_terminal(const std::vector<std::string>& args) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) throw std::runtime_error("no pty");
  // Opened here, not in the child: reading the master before any slave is open would see EIO.
  const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  if (slave < 0) throw std::runtime_error("cannot open the pty's terminal side");
  const TempFolder scratch;
  const std::string err_path = (scratch / "stderr").string();

  std::vector<std::string> argv_storage;
  std::vector<char*> argv = reshard_argv(args, argv_storage);
  // A colour-capable terminal, whatever the test runner's environment says.
  std::vector<std::string> env_storage = {"TERM=xterm-256color"};
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("TERM=", 0) != 0 && entry.rfind("NO_COLOR=", 0) != 0) env_storage.push_back(entry);
  }
  std::vector<char*> env;
  for (std::string& entry : env_storage) env.push_back(entry.data());
  env.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(slave);
    ::close(master);
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int in = ::open("/dev/null", O_RDONLY);
    if (err < 0 || in < 0) ::_exit(126);
    ::dup2(in, STDIN_FILENO);
    ::dup2(slave, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::close(master);
    ::execve(argv[0], argv.data(), env.data());
    ::_exit(127);
  }
  ::close(slave);  // the child holds it now; EOF (EIO) comes when the child is done
  const std::string out = read_all(master);
  ::close(master);
  CommandResult result;
  result.exit_code = wait_for_exit(pid);
  result.out = without_carriage_returns(out);
  result.err = read_bytes(err_path);
  return result;
}

}  // namespace reshard::testing
