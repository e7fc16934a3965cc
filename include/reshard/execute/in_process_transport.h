// InProcessGroup: a job whose processes are threads of one OS process (as Gloo's tests run).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "reshard/execute/transport.h"

namespace reshard {

namespace in_process_detail {
class GroupState;
}

// Hands out one Transport per rank; each rank's thread must use only its own.
// Messages are matched by (source, destination, tag) in posting order and
// copied once, straight from the sender's buffer into the receiver's, by
// whichever side posts second; a request never touches a buffer after it
// ends. Liveness as with MPI: a wait lasts as long as its peer is alive,
// however slow, sleeping meanwhile. A rank that fails (abort() or
// mark_failed) makes every wait in the group throw Error(kPeerFailed) naming
// it; so does, for waits on it, a rank that left(); and waits on a rank
// that went silent (go_silent: a hung host) throw Error(kTimeout) naming it
// once it has been silent for the waiter's timeout. A failed group stays
// failed: carry on with a new one.
class InProcessGroup {
 public:
  // The default liveness bound, as MpiSessionOptions's.
  static constexpr std::chrono::milliseconds kDefaultTimeout{60'000};

  // Throws Error(kInvalidArgument) unless size >= 1 and timeout > 0.
  explicit InProcessGroup(int size, std::chrono::milliseconds timeout = kDefaultTimeout);
  ~InProcessGroup();
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const;

  // The transport of `rank`, owned by the group.
  Transport& transport(int rank);

  // Runs `body` on one thread per rank, each with its rank's transport, and
  // waits for all: the job as a launcher would run it. A rank that throws
  // fails the group at once, so the others' waits on it throw
  // Error(kPeerFailed) instead of waiting out the timeout. Rethrown here: the
  // root cause (what a rank threw that was not a kPeerFailed), else the first
  // failure; an Error with "rank N: " before its message, anything else as
  // thrown. Once run has failed the group stays failed: run again on a new one.
  void run(const std::function<void(Transport& transport)>& body);

  // Marks `rank` failed; the first failure is the one every error names.
  void mark_failed(int rank, std::string_view reason);
  // `rank` has stopped taking part (its thread ended): waits on it fail at once.
  void leave(int rank);
  // `rank` stops answering, as a process whose host hung would (for tests).
  void go_silent(int rank);

  // Point-to-point payload bytes and messages `rank` has sent or received,
  // counted when delivered (all_gather's metadata not included).
  uint64_t bytes_sent(int rank) const;
  uint64_t messages_sent(int rank) const;
  uint64_t bytes_received(int rank) const;

 private:
  int checked_rank(int rank) const;
  std::shared_ptr<in_process_detail::GroupState> state_;
  std::vector<std::unique_ptr<Transport>> transports_;
};

}  // namespace reshard
