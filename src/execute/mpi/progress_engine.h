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
#include <vector>

#include "failure_channel.h"
#include "reshard/execute/transport.h"

namespace reshard::mpi_detail {

class ChunkedRequest;

// What one look at a wait's condition found.
enum class WaitStep { kDone, kProgressed, kIdle };

// MPI makes progress only inside MPI calls, and a chunked request posts its
// next chunks only when someone looks at it. So every wait, whatever it waits
// for, advances every pending request of the transport: a rank waiting on
// one transfer still feeds the others its peers may be waiting on. One lock
// serialises all MPI calls of the transport.
class ProgressEngine {
 public:
  ProgressEngine(int rank, int size, MPI_Comm control, size_t max_bytes_in_flight,
                 std::chrono::milliseconds timeout);

  // Every call below except the accessors needs the lock held.
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mutex_); }

  void add(ChunkedRequest* request);
  void remove(ChunkedRequest* request);

  // One round: every pending request completes and posts what it can, and
  // failure notices from peers are read.
  void progress();

  // Throws Error(kPeerFailed) naming the failed rank once a peer has announced
  // its failure or this rank aborted.
  void throw_if_peer_failed();
  // Throws Error(kPeerFailed) if this rank aborted: nothing works after that.
  void throw_if_aborted() const;

  // Takes `bytes` of the in-flight budget if they fit, or unconditionally when
  // `always` (a request's first posted chunk). Returns whether taken.
  bool take_budget(size_t bytes, bool always);
  void give_back_budget(size_t bytes);

  // Repeats lock + progress + `step` until `step` says done. Throws
  // Error(kTimeout) once `step` has not progressed for the timeout, with
  // `waiting_for()` saying what was awaited (and so which peer is missing).
  void wait(const std::function<WaitStep()>& step, const std::function<std::string()>& waiting_for);

  // Keeps `resource` (buffers MPI may still write after a failed wait) alive
  // as long as the engine. Takes the lock.
  void keep_alive(std::shared_ptr<void> resource);
  void keep_alive_locked(std::shared_ptr<void> resource) { kept_alive_.push_back(std::move(resource)); }

  // Marks this rank failed and tells the peers (bounded in time).
  void abort(std::string_view reason) noexcept;

  int rank() const { return rank_; }
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeout_ms_.load()); }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ms_.store(timeout.count()); }
  size_t peak_bytes_in_flight() const { return peak_in_flight_.load(); }

  // Counts one completed request's payload (sent or received).
  void count_completed(bool sent, size_t bytes) {
    (sent ? bytes_sent_ : bytes_received_) += bytes;
    ++(sent ? messages_sent_ : messages_received_);
  }
  TransportCounters counters() const {
    return TransportCounters{bytes_sent_.load(), bytes_received_.load(), messages_sent_.load(),
                             messages_received_.load()};
  }

 private:
  std::mutex mutex_;
  int rank_;
  std::vector<ChunkedRequest*> requests_;
  std::vector<std::shared_ptr<void>> kept_alive_;
  FailureChannel failures_;
  std::optional<std::string> aborted_;  // this rank's own failure
  size_t max_in_flight_;
  size_t in_flight_ = 0;
  std::atomic<size_t> peak_in_flight_{0};
  std::atomic<int64_t> timeout_ms_;
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> messages_sent_{0};
  std::atomic<uint64_t> messages_received_{0};
};

}  // namespace reshard::mpi_detail
