#include "heartbeats.h"

namespace reshard::mpi_detail {
namespace {

constexpr int kHeartbeatTag = 1;
// Static, so that a send's request can be freed at once: MPI reads these
// bytes whenever it likes, and they never go away.
constexpr std::byte kBeat{0};
constexpr std::byte kGoodbye{1};

}  // namespace

Heartbeats::Heartbeats(MPI_Comm comm, int rank, int size)
    : comm_(comm), rank_(rank), size_(size), last_heard_(static_cast<size_t>(size), Clock::now()),
      left_(static_cast<size_t>(size), false) {}

void Heartbeats::send_to_all(const std::byte* message) noexcept {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || left_[static_cast<size_t>(peer)]) continue;
    MPI_Request request = MPI_REQUEST_NULL;
    // MPI_Isend does not write its buffer; the const_cast is for MPI-2 signatures.
    if (MPI_Isend(const_cast<std::byte*>(message), 1, MPI_BYTE, peer, kHeartbeatTag, comm_, &request) ==
        MPI_SUCCESS) {
      MPI_Request_free(&request);
    }
  }
}

void Heartbeats::beat(Clock::time_point now) {
  if (size_ == 1 || now - last_beat_ < kBeatPeriod) return;
  last_beat_ = now;
  send_to_all(&kBeat);
}

void Heartbeats::listen(Clock::time_point now) {
  while (size_ > 1) {
    int arrived = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, kHeartbeatTag, comm_, &arrived, &message, &status) != MPI_SUCCESS ||
        arrived == 0) {
      return;
    }
    std::byte kind{0};
    MPI_Mrecv(&kind, 1, MPI_BYTE, &message, MPI_STATUS_IGNORE);  // matched and one byte: local
    const auto peer = static_cast<size_t>(status.MPI_SOURCE);
    last_heard_[peer] = now;
    if (kind == kGoodbye) left_[peer] = true;
  }
}

Heartbeats::Clock::duration Heartbeats::silent_for(int peer, Clock::time_point now) const {
  if (peer == rank_) return Clock::duration::zero();
  return now - last_heard_[static_cast<size_t>(peer)];
}

void Heartbeats::say_goodbye() noexcept {
  if (size_ > 1) send_to_all(&kGoodbye);
}

}  // namespace reshard::mpi_detail
