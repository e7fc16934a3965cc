// TcpTransport: the processes of a job that MPI did not start (a TPU pod's
// hosts, torchrun's workers, a loop of ssh commands), joined over TCP.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "reshard/execute/fast_paths.h"
#include "reshard/execute/transport.h"

namespace reshard {

namespace tcp_detail {
class Engine;
}

struct TcpTransportOptions {
  int rank = 0;
  int size = 1;
  // "host:port" of the rendezvous, served by rank 0 (port 0 there: any free
  // port, announced through on_listening); the other ranks connect to it,
  // retrying until `timeout` while rank 0 is not up yet.
  std::string coordinator;
  // A secret every rank already shares (from a key-value store the launcher
  // trusts, JAX's say). Empty: rank 0 draws one and hands it out at the
  // rendezvous. Every data connection proves it with this token.
  std::string job_token;
  // The local address data connections listen on and leave from. Empty: the
  // one this process reaches the coordinator through (rank 0: the
  // coordinator's own address), so that only that network is used.
  std::string bind_address;
  // The liveness bound (Transport::set_timeout), and how long the rendezvous
  // waits for the job's processes to arrive.
  std::chrono::milliseconds timeout{60'000};
  // Between processes of one host that may read each other's memory (one
  // pid namespace, ptrace allowed), a message of 64 KiB or more crosses as
  // one kernel copy, the receiver reading it out of the sender's memory,
  // instead of through the loopback. False (or RESHARD_SINGLE_COPY=0 in the
  // environment) sends everything through the sockets.
  bool single_copy = true;
  // Rank 0: called with "ip:port" once it listens, before it waits for the
  // others (to publish the address where they will look for it).
  std::function<void(const std::string& address)> on_listening;
};

// Messages are framed on one TCP connection per pair of processes, matched by
// (source, tag) in sending order, and moved by one progress thread per
// transport, so a peer's bytes are taken as they arrive whatever this process
// is doing. Every connection proves it belongs to the job (the job token);
// a stray one is refused and logged. Peers send heartbeats when they have
// nothing else to send: a wait lasts as long as its peer is heard from,
// however slow, and fails with Error(kTimeout) naming the peer (rank, host,
// address) once it has been silent for the timeout; a peer that closed its
// connections or aborted fails waits on it with Error(kPeerFailed) at once,
// and so does the coordinator's (rank 0's) loss, named as such. Destroying the
// transport never waits for a peer that has gone.
class TcpTransport final : public Transport, public OwnedTransfers, public HostTopology {
 public:
  // Collective: every rank of the job constructs one. Throws
  // Error(kInvalidArgument) for a bad rank, size or address, Error(kTimeout)
  // naming the ranks that did not arrive, Error(kTransport) if the network
  // refuses.
  explicit TcpTransport(const TcpTransportOptions& options);
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  int rank() const override;
  int size() const override;
  std::unique_ptr<Request> isend(int peer, Tag tag, std::span<const std::byte> data) override;
  std::unique_ptr<Request> irecv(int peer, Tag tag, std::span<std::byte> data) override;
  std::unique_ptr<Request> isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                       std::shared_ptr<const void> owner) override;
  std::unique_ptr<Request> irecv_owned(int peer, Tag tag, std::span<std::byte> data,
                                       std::shared_ptr<const void> owner) override;
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> local) override;
  void barrier() override;
  bool all_equal(uint64_t value) override;
  TransportCounters counters() const override;
  Tag begin_operation() override;
  void abort(std::string_view reason) noexcept override;
  void set_timeout(std::chrono::milliseconds timeout) override;
  std::chrono::milliseconds timeout() const override;
  int processes_on_this_host() const override;
  // Owned transfers and the host count.
  FastPaths fast_paths() override;

  // Rank `rank`'s host, numbered 0..H-1 by lowest rank: one kernel (boot id)
  // and one network namespace, as the MPI transport tells hosts apart.
  int host_of(int rank) const;
  // "rank 2 (hostname, ip:port)": how errors and logs name rank `rank`.
  std::string label_of(int rank) const;
  // Whether messages to and from `rank` cross as one kernel copy (single_copy).
  bool reads_across(int rank) const;
  // Whether any TCP transport of this process gave up on a peer (one silent
  // past the timeout, or whose connection broke) or was told by a peer's
  // abort that the job failed: an exit that waits for every process, as
  // jax.distributed's does, could wait for a lost one.
  static bool gave_up_on_a_peer();

 private:
  struct Job;
  void check_peer(int peer) const;

  std::shared_ptr<tcp_detail::Engine> engine_;  // shared with the requests, which may outlive a call
  std::unique_ptr<Job> job_;
  int rank_;
  int size_;
  uint64_t operations_ = 0;
  uint64_t collectives_ = 0;
};

}  // namespace reshard
