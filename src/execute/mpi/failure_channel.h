// FailureChannel: how a failing rank tells its peers, so they name it.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>
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
  // Notices still on their way are left to Orphans, with their text.
  ~FailureChannel();
  FailureChannel(const FailureChannel&) = delete;
  FailureChannel& operator=(const FailureChannel&) = delete;

  // Starts sending `message` to every peer (once; later calls do nothing).
  // Best effort: errors are swallowed, this rank is failing anyway.
  void post(std::string_view message) noexcept;
  // Whether every notice post() started has left.
  bool posted_all_out() noexcept;

  // Reads a notice if one has arrived (checking at most once a millisecond,
  // probing costs time); returns the first failure ever seen.
  const std::optional<PeerFailure>& poll();

 private:
  MPI_Comm comm_;
  int rank_;
  int size_;
  std::optional<PeerFailure> failure_;
  std::shared_ptr<const std::string> outgoing_;  // shared with sends still in MPI's hands
  std::vector<MPI_Request> sends_;
  std::chrono::steady_clock::time_point next_poll_{};
};

}  // namespace reshard::mpi_detail
