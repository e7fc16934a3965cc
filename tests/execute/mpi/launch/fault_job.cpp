// An MPI job in which rank 2 fails, or falters, in the middle of a transfer,
// in the way argv[1] names; driven by fault_test.cpp under `mpirun -np 3`.
//   exit:   rank 2 ends without a word (std::_Exit), as a crash would.
//   throw:  rank 2 throws; its top level announces the failure and aborts.
//   silent: rank 2 stops dead (SIGSTOP), as on a hung host: no heartbeat.
//   slow:   rank 2 pauses for three liveness bounds, alive, then goes on.
// Ranks 0 and 1 each expect a stream of messages from rank 2. No rank may
// wait forever: but for `slow`, the job must end non-zero, soon; a slow
// rank must be waited for, and the job succeed.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "reshard/execute/mpi/mpi_session.h"
#include "reshard/execute/mpi/mpi_transport.h"
#include "reshard/layout/error.h"

namespace {

constexpr int kFailingRank = 2;
constexpr int kMessages = 64;
constexpr int kMessagesBeforeFailure = 16;
constexpr size_t kMessageBytes = size_t{1} << 20;

void send_stream(reshard::Transport& transport, reshard::Tag tag, const std::string& mode) {
  const std::vector<std::byte> message(kMessageBytes, std::byte{42});
  for (int i = 0; i < kMessages; ++i) {
    if (i == kMessagesBeforeFailure) {
      std::cerr << "rank 2: failing (" << mode << ") after " << i << " of " << kMessages << " messages\n";
      if (mode == "exit") std::_Exit(0);
      if (mode == "throw") throw reshard::Error(reshard::ErrorCode::kIo, "rank 2: simulated failure mid-transfer");
      if (mode == "silent") raise(SIGSTOP);
      if (mode == "slow") std::this_thread::sleep_for(3 * transport.timeout());
    }
    for (int peer = 0; peer < kFailingRank; ++peer) {
      transport.send(peer, tag + static_cast<reshard::Tag>(i), message);
    }
  }
}

void receive_stream(reshard::Transport& transport, reshard::Tag tag) {
  std::vector<std::byte> message(kMessageBytes);
  for (int i = 0; i < kMessages; ++i) transport.recv(kFailingRank, tag + static_cast<reshard::Tag>(i), message);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  reshard::MpiSession session;
  reshard::MpiTransportOptions options;
  options.timeout = std::chrono::seconds(2);
  reshard::MpiTransport transport(MPI_COMM_WORLD, options);
  try {
    if (transport.size() != 3) throw reshard::Error(reshard::ErrorCode::kInvalidArgument, "run with mpirun -np 3");
    const reshard::Tag tag = transport.begin_operation();
    if (transport.rank() == kFailingRank) {
      send_stream(transport, tag, mode);
    } else {
      receive_stream(transport, tag);
    }
    transport.barrier();
  } catch (const std::exception& e) {
    // What a reshard program's top level does: report, tell the peers, end the job.
    // One write, so that the ranks' lines do not interleave.
    const std::string line = std::string("error: ") + e.what() + "\n";
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
    std::cerr.flush();
    transport.abort(e.what());
    reshard::MpiSession::abort_job(1);
  }
  std::cerr << "rank " << transport.rank() << ": finished without a failure\n";
  return 0;
}
