// Jobs over TcpTransport for tests: ranks as threads of this process (each
// with its own transport and real sockets), or as processes started without
// any launcher, each told its rank, the size and the coordinator by RESHARD_*
// variables, as a TPU pod's or torchrun's processes are.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "reshard/execute/tcp_transport.h"

namespace reshard::testing {

// Runs `body` on `size` threads, each with a TcpTransport of its rank over
// 127.0.0.1 (rank 0 on a free port). Rethrows the first rank's exception.
void run_tcp_threads(int size, const std::function<void(TcpTransport&)>& body,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(20'000));

// Starts `size` copies of this test binary running only `gtest_filter`, each
// with RESHARD_RANK/RESHARD_SIZE/RESHARD_COORDINATOR set (and `extra_env`),
// and returns each one's exit status and output, by rank. Kills them all
// after `limit`.
struct ChildResult {
  int status = -1;  // the exit code, or 128 + signal
  std::string output;
};
std::vector<ChildResult> run_tcp_processes(int size, const std::string& gtest_filter,
                                           const std::vector<std::string>& extra_env,
                                           std::chrono::seconds limit = std::chrono::seconds(120));

// A free TCP port on 127.0.0.1 at the time of the call.
int free_port();

}  // namespace reshard::testing
