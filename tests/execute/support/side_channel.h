// SideChannel: events between the ranks of a test beside the transport under
// test, for a rank that must act once another rank, blocked in that
// transport, has seen something happen.
#pragma once

#include <condition_variable>
#include <mutex>
#include <vector>

namespace reshard::testing {

// One-way events to a rank. notify() may be called from any thread of the
// notifying rank (a helper beside a rank blocked in the transport).
class SideChannel {
 public:
  virtual ~SideChannel() = default;
  // Tells `rank` that its event happened.
  virtual void notify(int rank) = 0;
  // Blocks rank `self` until some rank notified it (once per notify).
  virtual void await(int self) = 0;
};

// Among rank threads of one process (run_ranks): a counter per rank.
class ThreadSideChannel final : public SideChannel {
 public:
  explicit ThreadSideChannel(int ranks) : pending_(static_cast<size_t>(ranks), 0) {}
  void notify(int rank) override;
  void await(int self) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int> pending_;
};

}  // namespace reshard::testing
