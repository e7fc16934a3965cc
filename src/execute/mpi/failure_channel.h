// FailureChannel: how a failing rank tells its peers, so they name it.
#pragma once

#include <mpi.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace reshard::mpi_detail {

// A peer's announced failure.
struct PeerFailure {
  int rank = 0;
  std::string message;
};

// Notices travel on a communicator of their own, so they never match data.
// Not thread-safe: the progress engine's lock guards it.
class FailureChannel {
 public:
  FailureChannel(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  ~FailureChannel();
  FailureChannel(const FailureChannel&) = delete;
  FailureChannel& operator=(const FailureChannel&) = delete;

  // Sends `message` to every peer, waits at most `patience` until the sends
  // are out, then lingers `linger` so that the peers, which poll for notices
  // every millisecond while they wait, can report it before the job is torn
  // down. Best effort: errors are swallowed, the job is ending anyway.
  void announce(std::string_view message, std::chrono::milliseconds patience,
                std::chrono::milliseconds linger) noexcept;

  // Reads a notice if one has arrived (checking at most once a millisecond,
  // probing costs time); returns the first failure ever seen.
  const std::optional<PeerFailure>& poll();

 private:
  MPI_Comm comm_;
  int rank_;
  int size_;
  std::optional<PeerFailure> failure_;
  std::string outgoing_;
  std::vector<MPI_Request> sends_;
  std::chrono::steady_clock::time_point next_poll_{};
};

}  // namespace reshard::mpi_detail
