// An MPI job in which rank 2 fails, or falters, in the middle of a transfer,
// in the way argv[1] names; driven by fault_test.cpp under `mpirun -np 3`.
//   exit:   rank 2 ends without a word (std::_Exit), as a crash would.
//   throw:  rank 2 throws; its top level announces the failure and aborts.
//   silent: rank 2 stops dead (SIGSTOP), as on a hung host: no heartbeat.
//   slow:   rank 2 pauses for three liveness bounds, alive, then goes on.
//   killed: rank 2 offers each peer a 256 MiB message and is killed (SIGKILL)
//           while they read it from its memory (the single-copy path, where
//           the host allows it; through MPI, mid-receive).
//   killed-shared: the same with the message in a Buffer::allocate buffer,
//           which lives in the shared memory arena that its peers map and
//           copy from themselves, where the host allows it.
//   killed-writing: rank 2 sends each peer a 128 MiB strided message (256-byte
//           rows 512 bytes apart) into the peer's arena, which it writes
//           itself where the host allows it, and is killed while writing.
// Ranks 0 and 1 each expect a stream of messages from rank 2. No rank may
// wait forever: but for `slow`, the job must end non-zero, soon; a slow
// rank must be waited for, and the job succeed.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "reshard/execute/buffer.h"
#include "reshard/execute/mpi/mpi_session.h"
#include "reshard/execute/mpi/mpi_transport.h"
#include "reshard/execute/transport_calls.h"
#include "reshard/layout/error.h"

namespace {

constexpr int kFailingRank = 2;
constexpr int kMessages = 64;
constexpr int kMessagesBeforeFailure = 16;
constexpr size_t kMessageBytes = size_t{1} << 20;
constexpr size_t kLargeMessageBytes = size_t{256} << 20;

// Whether message `i` of the stream is the large one that rank 2 dies sending.
size_t message_bytes(int i, const std::string& mode) {
  if (i != kMessagesBeforeFailure) return kMessageBytes;
  if (mode == "killed" || mode == "killed-shared") return kLargeMessageBytes;
  return mode == "killed-writing" ? kLargeMessageBytes / 2 : kMessageBytes;
}

// Dies after `delay`, whatever the main thread is doing then.
void die_after(std::chrono::milliseconds delay) {
  std::thread([delay] {
    std::this_thread::sleep_for(delay);
    raise(SIGKILL);
  }).detach();
}

// Sends both peers every other 256 bytes of a shard in its arena, and dies
// while writing them into their arenas (inside the wait, where it writes).
[[noreturn]] void die_while_writing(reshard::Transport& transport, reshard::Tag tag) {
  reshard::Buffer shard = reshard::Buffer::allocate(kLargeMessageBytes);
  std::fill(shard.bytes().begin(), shard.bytes().end(), std::byte{42});
  constexpr uint64_t kRow = 256;
  const reshard::ConstRunRows rows{shard.data(), kRow, 2 * kRow, kLargeMessageBytes / (2 * kRow)};
  std::vector<reshard::GatherSend> batch;
  for (int peer = 0; peer < kFailingRank; ++peer) batch.push_back({peer, tag, std::span(&rows, 1), shard.owner()});
  std::vector<std::unique_ptr<reshard::Request>> sends = reshard::isend_gather_all(transport, batch, 1);
  die_after(std::chrono::milliseconds(20));
  for (const auto& send : sends) send->wait();
  raise(SIGKILL);
  std::_Exit(9);  // not reached
}

// Offers both peers the large message, then dies while they read it.
// In the caller's own memory (a vector), or in a buffer of reshard's (in the
// shared arena where peers map it).
[[noreturn]] void die_while_read(reshard::Transport& transport, reshard::Tag tag, bool shared) {
  std::span<const std::byte> bytes;
  std::shared_ptr<const void> owner;
  if (shared) {
    reshard::Buffer buffer = reshard::Buffer::allocate(kLargeMessageBytes);
    std::fill(buffer.bytes().begin(), buffer.bytes().end(), std::byte{42});
    bytes = std::as_const(buffer).bytes();
    owner = buffer.owner();
  } else {
    auto large = std::make_shared<std::vector<std::byte>>(kLargeMessageBytes, std::byte{42});
    bytes = *large;
    owner = large;
  }
  std::vector<std::unique_ptr<reshard::Request>> sends;
  for (int peer = 0; peer < kFailingRank; ++peer) {
    sends.push_back(reshard::isend_owned(transport, peer, tag, bytes, owner));
  }
  // Long enough for the headers to arrive and the reads to begin, far
  // shorter than reading 256 MiB twice.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  raise(SIGKILL);
  std::_Exit(9);  // not reached
}

void send_stream(reshard::Transport& transport, reshard::Tag tag, const std::string& mode) {
  const std::vector<std::byte> message(kMessageBytes, std::byte{42});
  for (int i = 0; i < kMessages; ++i) {
    if (i == kMessagesBeforeFailure) {
      std::cerr << "rank 2: failing (" << mode << ") after " << i << " of " << kMessages << " messages\n";
      if (mode == "exit") std::_Exit(0);
      if (mode == "throw") throw reshard::Error(reshard::ErrorCode::kIo, "rank 2: simulated failure mid-transfer");
      if (mode == "silent") raise(SIGSTOP);
      if (mode == "slow") std::this_thread::sleep_for(3 * transport.timeout());
      if (mode == "killed" || mode == "killed-shared") {
        die_while_read(transport, tag + static_cast<reshard::Tag>(i), mode == "killed-shared");
      }
      if (mode == "killed-writing") die_while_writing(transport, tag + static_cast<reshard::Tag>(i));
    }
    for (int peer = 0; peer < kFailingRank; ++peer) {
      transport.send(peer, tag + static_cast<reshard::Tag>(i), message);
    }
  }
}

void receive_stream(reshard::Transport& transport, reshard::Tag tag, const std::string& mode) {
  std::vector<std::byte> message;
  for (int i = 0; i < kMessages; ++i) {
    if (mode == "killed-writing" && i == kMessagesBeforeFailure) {
      // Into a buffer of reshard's, in the arena, that the sender may write.
      reshard::Buffer into = reshard::Buffer::allocate(message_bytes(i, mode));
      reshard::irecv_owned(transport, kFailingRank, tag + static_cast<reshard::Tag>(i), into.bytes(), into.owner())->wait();
      continue;
    }
    message.resize(message_bytes(i, mode));
    transport.recv(kFailingRank, tag + static_cast<reshard::Tag>(i), message);
  }
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
      receive_stream(transport, tag, mode);
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
