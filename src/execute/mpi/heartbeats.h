// Heartbeats: which peers are alive, told apart from which are making progress.
#pragma once

#include <mpi.h>

#include <chrono>
#include <optional>
#include <vector>

namespace reshard::mpi_detail {

// Every rank sends every other a tiny beat each kBeatPeriod, from a thread of
// the transport's own, so a rank busy outside MPI (reading a large shard,
// computing) still beats, and is waited for however slow it is. A peer whose
// beats have stopped for longer than the timeout is dead, hung, or cut off.
// A rank that closes its transport says goodbye, so peers still waiting on
// it fail at once instead of after the timeout. Beats travel on a
// communicator of their own. Not thread-safe: the progress engine's lock
// guards it.
class Heartbeats {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kBeatPeriod = std::chrono::milliseconds(50);

  Heartbeats(MPI_Comm comm, int rank, int size);
  Heartbeats(const Heartbeats&) = delete;
  Heartbeats& operator=(const Heartbeats&) = delete;

  // Sends a beat to every peer if a period has passed since the last.
  void beat(Clock::time_point now);
  // Reads the beats and goodbyes that have arrived.
  void listen(Clock::time_point now);
  // How long `peer` has been silent (zero for this rank itself).
  Clock::duration silent_for(int peer, Clock::time_point now) const;
  // Whether `peer` closed its transport.
  bool left(int peer) const { return left_[static_cast<size_t>(peer)]; }
  // Tells every peer this rank is closing its transport. Best effort.
  void say_goodbye() noexcept;

 private:
  void send_to_all(const std::byte* message) noexcept;

  MPI_Comm comm_;
  int rank_;
  int size_;
  std::vector<Clock::time_point> last_heard_;
  std::vector<bool> left_;
  Clock::time_point last_beat_{};
};

}  // namespace reshard::mpi_detail
