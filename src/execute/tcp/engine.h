// The TCP transport's progress engine: one connection per peer, framed
// messages matched by (source, tag) in sending order, and one thread that
// moves every peer's bytes as they come, sends heartbeats when there is
// nothing else to send, and notices peers that leave, fail or fall silent.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "execute/tcp/socket.h"
#include "execute/tcp/wire.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"

namespace reshard::tcp_detail {

// One send or receive, shared by its Request and the engine.
struct Op {
  bool is_send = false;
  int peer = 0;
  Tag tag = 0;
  std::span<const std::byte> out;     // a send's bytes
  std::span<std::byte> in;            // where a receive's go
  bool any_size = false;              // a receive taking whatever arrives, into `owned`
  std::vector<std::byte> owned;       // that message; or a withdrawn send's bytes, copied
  std::shared_ptr<const void> keep;   // memory the caller keeps alive for us
  bool counted = true;                // false: a collective's own, left out of the counters
  bool done = false;
  bool withdrawn = false;
  std::optional<Error> error;         // set with done when it failed
};

class Engine {
 public:
  // `connections` by rank, this rank's invalid; `labels` name each rank in
  // errors ("rank 2 (host, 10.0.0.2:41000)"); `readable_pids` the pid of each
  // peer whose memory the two processes read directly (0: none), for
  // messages that stay on their host (same_host_probe.h).
  Engine(int rank, std::vector<Socket> connections, std::vector<std::string> labels,
         std::vector<pid_t> readable_pids, std::chrono::milliseconds timeout);
  // Says goodbye to the peers still there, waits briefly for that to leave,
  // and closes; never waits on a peer that has gone.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // `counted` false: a collective's own message, which TransportCounters leave out.
  std::shared_ptr<Op> send(int peer, Tag tag, std::span<const std::byte> data, std::shared_ptr<const void> keep,
                           bool counted = true);
  std::shared_ptr<Op> receive(int peer, Tag tag, std::span<std::byte> data, std::shared_ptr<const void> keep);
  // A collective's receive of a message of any size (into Op::owned); not counted.
  std::shared_ptr<Op> receive_any_size(int peer, Tag tag);

  // Request::wait and Request::test for `op`.
  void wait(Op& op);
  bool test(Op& op);
  // The request ended: the engine never touches the op's memory again.
  void withdraw(const std::shared_ptr<Op>& op) noexcept;

  void abort(std::string_view reason) noexcept;
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const;
  TransportCounters counters() const;

 private:
  struct OutItem;
  struct Incoming;
  struct Peer;

  void post(const std::shared_ptr<Op>& op);
  void run();
  void read_from(Peer& peer);
  bool read_some(Peer& peer);
  void begin_frame(Peer& peer);
  void end_frame(Peer& peer);
  void write_to(Peer& peer);
  void send_heartbeats(Clock::time_point now);
  void arrive_here(Peer& self, const std::shared_ptr<Op>& op);
  void deliver(Peer& from, Incoming& message, Op& op);
  void read_across(Peer& from, const Incoming& message, Op& op);
  void send_control(Peer& to, FrameKind kind, std::span<const std::byte> payload);
  void match_arrival(Peer& from, const std::shared_ptr<Incoming>& message);
  void complete(Op& op, std::optional<Error> error);
  void peer_lost(Peer& peer, const std::string& why);
  void peer_left(Peer& peer);
  void fail_everything(const Error& error);
  void fail_pending_of(Peer& peer, const Error& error);
  void wake();
  std::optional<Error> failure_for(const Peer& peer) const;

  const int rank_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::chrono::milliseconds timeout_;
  TransportCounters counters_;
  std::optional<Error> job_failure_;  // an abort here or from any peer fails everything
  bool stopping_ = false;
  int wake_fd_ = -1;
  std::vector<std::byte> discard_;  // where a withdrawn or refused receive's bytes go
  std::thread thread_;
};

// Whether any engine of this process gave up on a peer, or heard a peer's abort.
bool gave_up_on_a_peer();

}  // namespace reshard::tcp_detail
