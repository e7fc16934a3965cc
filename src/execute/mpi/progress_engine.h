// ProgressEngine: drives every pending request of one MPI transport.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "failure_channel.h"
#include "heartbeats.h"
#include "reshard/execute/transport.h"

namespace reshard::mpi_detail {

class SegmentedRequest;
class DirectRequest;
class PolledRequest;

// Which way a direct request goes, to or from which peer, on which tag: its
// control messages arrive in order per key.
struct DirectChannelKey {
  bool is_send = false;
  int peer = 0;
  Tag tag = 0;
  bool operator==(const DirectChannelKey&) const = default;
};

struct DirectChannelKeyHash {
  size_t operator()(const DirectChannelKey& key) const {
    return std::hash<Tag>()(key.tag * 0x9e3779b97f4a7c15ULL ^ (static_cast<uint64_t>(key.peer) << 1) ^
                            (key.is_send ? 1u : 0u));
  }
};

// What one look at a wait's condition found.
enum class WaitStep { kDone, kProgressed, kIdle };

// What a wait is waiting for: the step that advances it, what it waits on
// (for messages) and the peers it needs.
struct WaitFor {
  std::function<WaitStep()> step;
  std::function<std::string()> describe;
  std::function<std::vector<int>()> peers;
};

// MPI makes progress only inside MPI calls, and a segmented request posts its
// next segments only when someone looks at it. So every wait, whatever it waits
// for, advances every pending request of the transport: a rank waiting on
// one transfer still feeds the others its peers may be waiting on. One lock
// serialises all MPI calls of the transport.
//
// Waiting is separate from liveness: a wait lasts as long as the peers it
// needs are alive (Heartbeats), however slow they are. While data moves (any
// request of the transport completed something recently) a wait polls
// without sleeping, yielding the core between looks: over shared memory MPI
// moves large and non-contiguous messages only while some rank calls it, so
// a sleep there stalls the peers too. After a stretch with no completions it
// sleeps with a backoff between looks: ranks often outnumber cores.
class ProgressEngine {
 public:
  // `control` carries failure notices, `heartbeat` the beats.
  ProgressEngine(int rank, int size, MPI_Comm control, MPI_Comm heartbeat, size_t max_bytes_in_flight,
                 std::chrono::milliseconds timeout);

  // Every call below except the accessors and abort needs the lock held.
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mutex_); }

  void add(SegmentedRequest* request);
  void remove(SegmentedRequest* request);
  void add(PolledRequest* request);
  void remove(PolledRequest* request);
  // A direct request is polled, and ordered among those on its channel.
  void add(DirectRequest* request);
  void remove(DirectRequest* request);
  // Whether no request started before `request` on its channel awaits the
  // same kind of control message: control messages are taken in that order.
  // Looks at the requests of that channel only: every request of a round
  // asks this, and a round may poll hundreds.
  bool first_awaiting(const DirectRequest* request) const;

  // A pending request completed a segment or a message: waits keep polling.
  void note_completion() { ++completions_; }

  // One round: every pending request completes and posts what it can, and
  // failure notices and heartbeats from peers are read.
  void progress();

  // Throws Error(kPeerFailed) naming the failed rank once a peer has announced
  // its failure or this rank aborted.
  void throw_if_peer_failed();
  // Throws Error(kPeerFailed) if this rank aborted: nothing works after that.
  void throw_if_aborted() const;
  // Throws Error(kTimeout) if one of `peers` has been silent for longer than
  // the timeout, and Error(kPeerFailed) if one closed its transport and the
  // wait has been idle for `idle` past a grace period.
  void throw_if_peer_gone(const std::vector<int>& peers, std::chrono::steady_clock::duration idle,
                          const std::function<std::string()>& describe);

  // Takes `bytes` of the in-flight budget if they fit, or unconditionally when
  // `always` (a request's first posted segment). Returns whether taken.
  bool take_budget(size_t bytes, bool always);
  void give_back_budget(size_t bytes);

  // Repeats lock + progress + `step` until it says done, sleeping between
  // idle looks. Throws as throw_if_peer_failed and throw_if_peer_gone do.
  void wait(const WaitFor& what);

  // The heartbeat thread's round: beats, reads beats, reaps orphans.
  void heartbeat();
  // Tells the peers this rank is closing the transport.
  void say_goodbye() noexcept;

  // Marks this rank failed and tells the peers (bounded in time; the lock is
  // taken only briefly, so heartbeats go on meanwhile). Takes the lock.
  void abort(std::string_view reason) noexcept;

  // Where each rank runs, entry j for rank j ("host 1 (myhost, 10.213.0.3)"),
  // for the errors naming a silent peer. Set once, before any wait.
  void set_host_labels(std::vector<std::string> labels) { host_labels_ = std::move(labels); }

  int rank() const { return rank_; }
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeout_ms_.load()); }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ms_.store(timeout.count()); }
  size_t peak_bytes_in_flight() const { return peak_in_flight_.load(); }

  // Counts one completed request's payload (sent or received).
  void count_completed(bool sent, size_t bytes) {
    (sent ? bytes_sent_ : bytes_received_) += bytes;
    ++(sent ? messages_sent_ : messages_received_);
  }
  // Counts bytes of completed sends that this process wrote into its receivers itself.
  void count_written(size_t bytes) { bytes_written_ += bytes; }
  TransportCounters counters() const {
    return TransportCounters{bytes_sent_.load(),     bytes_received_.load(), messages_sent_.load(),
                             messages_received_.load(), bytes_written_.load()};
  }

 private:
  // " on host 1 (myhost, 10.213.0.3)", or nothing before set_host_labels.
  std::string where(int peer) const;

  std::mutex mutex_;
  int rank_;
  std::vector<SegmentedRequest*> requests_;
  std::vector<PolledRequest*> polled_;
  // Direct requests (also polled) by channel, each channel's in the order started.
  std::unordered_map<DirectChannelKey, std::vector<const DirectRequest*>, DirectChannelKeyHash> direct_;
  std::atomic<uint64_t> completions_{0};  // of every request, for the wait's polling
  FailureChannel failures_;
  Heartbeats heartbeats_;
  std::optional<std::string> aborted_;  // this rank's own failure
  std::vector<std::string> host_labels_;
  size_t max_in_flight_;
  size_t in_flight_ = 0;
  std::atomic<size_t> peak_in_flight_{0};
  std::atomic<int64_t> timeout_ms_;
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> messages_sent_{0};
  std::atomic<uint64_t> messages_received_{0};
  std::atomic<uint64_t> bytes_written_{0};
};

}  // namespace reshard::mpi_detail
