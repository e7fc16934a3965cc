// The state all ranks of an InProcessGroup share: unmatched messages, gatherings, the first failure.
#pragma once

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
#include <tuple>
#include <vector>

#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"

namespace reshard::in_process_detail {

// A posted send or receive. kCopying cannot be cancelled: the copy is under way
// outside the lock and always finishes.
struct Operation {
  enum class Phase { kPosted, kCopying, kDone };
  int rank = 0;  // the poster
  int peer = 0;
  Tag tag = 0;
  bool is_send = false;
  const std::byte* send_data = nullptr;
  std::byte* recv_data = nullptr;
  size_t size = 0;
  Phase phase = Phase::kPosted;
  std::optional<Error> error;
};

class GroupState {
 public:
  explicit GroupState(int size);

  int size() const { return size_; }

  // Matches `op` against the other side's oldest unmatched operation with the
  // same (source, destination, tag), copying outside the lock; else queues it.
  void post(const std::shared_ptr<Operation>& op);
  // Blocks until `op` is done, however long its peer takes while it is alive.
  // A posted op is withdrawn before throwing Error(kPeerFailed) (a rank
  // failed, or the peer left) or Error(kTimeout) (the peer has been silent
  // for longer than `timeout`); its error is kept for later waits.
  void wait(Operation& op, std::chrono::milliseconds timeout);
  // Whether `op` is done; throws as wait() does if it failed.
  bool test(Operation& op, std::chrono::milliseconds timeout);
  // Withdraws a posted op, or waits for a copy in progress (a request's end).
  void release(Operation& op) noexcept;

  // Deposits `local` as `rank`'s part of gathering `generation` and returns
  // every rank's part once all have arrived.
  std::vector<std::vector<std::byte>> all_gather(int rank, uint64_t generation, std::span<const std::byte> local,
                                                 std::chrono::milliseconds timeout);

  void mark_failed(int rank, std::string_view reason);
  // `rank` has stopped taking part: waits on it fail at once.
  void leave(int rank);
  // `rank` stops answering as a hung host would: waits on it time out.
  void go_silent(int rank);
  uint64_t bytes_sent(int rank) const;
  uint64_t messages_sent(int rank) const;
  uint64_t bytes_received(int rank) const;
  TransportCounters counters(int rank) const;

 private:
  using Key = std::tuple<int, int, Tag>;  // (source, destination, tag)
  using Queue = std::map<Key, std::deque<std::shared_ptr<Operation>>>;
  struct Gathering {
    std::vector<std::vector<std::byte>> parts;
    std::vector<bool> present;  // by rank: deposited its part
    int arrived = 0;
    int left = 0;
  };
  using Clock = std::chrono::steady_clock;

  static Key key_of(const Operation& op);
  static void deliver(Operation& send, Operation& recv);
  Error failure_error() const;
  // Why waiting on `peers` is hopeless, if it is: a failure, a peer that
  // left, or one silent for longer than `timeout`. `what` says what `rank` waits on.
  std::optional<Error> peer_gone(int rank, std::span<const int> peers, std::chrono::milliseconds timeout,
                                 const std::string& what) const;
  // Sleeps until something changes, or until the first of `peers` that is
  // silent has been silent for `timeout`.
  void sleep_on(std::unique_lock<std::mutex>& lock, std::span<const int> peers, std::chrono::milliseconds timeout);
  static std::string describe(const Operation& op);
  void withdraw(Operation& op);
  void finish_with(Operation& op, Error error);
  void count_delivery(const Operation& send, const Operation& recv);

  const int size_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  Queue unmatched_sends_;
  Queue unmatched_recvs_;
  std::map<uint64_t, Gathering> gatherings_;
  std::optional<std::pair<int, std::string>> failure_;  // the first failed rank and why
  std::vector<uint64_t> bytes_sent_;
  std::vector<uint64_t> messages_sent_;
  std::vector<uint64_t> bytes_received_;
  std::vector<uint64_t> messages_received_;
  std::vector<bool> left_;                                      // by rank
  std::vector<std::optional<Clock::time_point>> silent_since_;  // by rank
};

}  // namespace reshard::in_process_detail
