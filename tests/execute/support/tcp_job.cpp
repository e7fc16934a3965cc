#include "execute/support/tcp_job.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <future>
#include <mutex>
#include <thread>

#include "reshard/layout/error.h"

extern char** environ;

namespace reshard::testing {

void run_tcp_threads(int size, const std::function<void(TcpTransport&)>& body, std::chrono::milliseconds timeout) {
  std::promise<std::string> coordinator;
  std::shared_future<std::string> address = coordinator.get_future().share();
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        TcpTransportOptions options;
        options.rank = rank;
        options.size = size;
        options.timeout = timeout;
        if (rank == 0) {
          options.coordinator = "127.0.0.1:0";
          options.on_listening = [&](const std::string& at) { coordinator.set_value(at); };
        } else {
          options.coordinator = address.get();
        }
        TcpTransport transport(options);
        if (rank == 0 && size == 1) coordinator.set_value("");
        body(transport);
      } catch (...) {
        // Ranks still waiting for the address then fail to reach a closed port.
        if (rank == 0) {
          try {
            coordinator.set_value("127.0.0.1:1");
          } catch (const std::future_error&) {
          }
        }
        std::lock_guard lock(mutex);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (first) std::rethrow_exception(first);
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw Error(ErrorCode::kIo, "no free port");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

namespace {

struct Child {
  pid_t pid = -1;
  int output = -1;  // read end of its stdout+stderr
};

Child start_child(int rank, int size, int port, const std::string& filter, const std::vector<std::string>& extra_env) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw Error(ErrorCode::kIo, "pipe");
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
  env.push_back("RESHARD_RANK=" + std::to_string(rank));
  env.push_back("RESHARD_SIZE=" + std::to_string(size));
  env.push_back("RESHARD_COORDINATOR=127.0.0.1:" + std::to_string(port));
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::string filter_flag = "--gtest_filter=" + filter;
  std::string exe = "/proc/self/exe";
  char* argv[] = {exe.data(), filter_flag.data(), nullptr};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], 1);
    ::dup2(pipe_fds[1], 2);
    ::execve("/proc/self/exe", argv, envp.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  return {pid, pipe_fds[0]};
}

}  // namespace

std::vector<ChildResult> run_tcp_processes(int size, const std::string& gtest_filter,
                                           const std::vector<std::string>& extra_env, std::chrono::seconds limit) {
  const int port = free_port();
  std::vector<Child> children;
  for (int rank = 0; rank < size; ++rank) children.push_back(start_child(rank, size, port, gtest_filter, extra_env));
  std::vector<ChildResult> results(static_cast<size_t>(size));
  std::vector<std::thread> readers;
  for (size_t i = 0; i < children.size(); ++i) {
    readers.emplace_back([&, i] {
      char buffer[4096];
      ssize_t got = 0;
      while ((got = ::read(children[i].output, buffer, sizeof buffer)) > 0) results[i].output.append(buffer, static_cast<size_t>(got));
      ::close(children[i].output);
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (size_t i = 0; i < children.size(); ++i) {
    int status = 0;
    while (::waitpid(children[i].pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (const Child& child : children) ::kill(child.pid, SIGKILL);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    results[i].status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  for (auto& reader : readers) reader.join();
  return results;
}

}  // namespace reshard::testing
