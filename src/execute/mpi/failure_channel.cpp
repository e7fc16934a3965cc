#include "failure_channel.h"


#include "orphans.h"
#include "reshard/layout/error.h"

namespace reshard::mpi_detail {
namespace {

constexpr int kFailureTag = 1;
constexpr size_t kMaxMessageBytes = 1024;  // small enough to go eagerly
constexpr auto kPollInterval = std::chrono::milliseconds(1);

}  // namespace

FailureChannel::~FailureChannel() {
  for (MPI_Request& request : sends_) {
    if (request != MPI_REQUEST_NULL) Orphans::instance().adopt(request, outgoing_);
  }
}

void FailureChannel::post(std::string_view message) noexcept {
  if (!sends_.empty() || size_ == 1) return;  // announced already, or nobody to tell
  try {
    outgoing_ = std::make_shared<const std::string>(message.substr(0, kMaxMessageBytes));
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      MPI_Request request = MPI_REQUEST_NULL;
      if (MPI_Isend(outgoing_->data(), static_cast<int>(outgoing_->size()), MPI_BYTE, peer, kFailureTag, comm_,
                    &request) == MPI_SUCCESS) {
        sends_.push_back(request);
      }
    }
  } catch (...) {
    // Announcing is a courtesy on the way out; never let it mask the failure.
  }
}

bool FailureChannel::posted_all_out() noexcept {
  int done = 0;
  if (MPI_Testall(static_cast<int>(sends_.size()), sends_.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
    return true;  // nothing more will come of them
  }
  return done != 0;
}

const std::optional<PeerFailure>& FailureChannel::poll() {
  if (failure_ || size_ == 1) return failure_;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_poll_) return failure_;
  next_poll_ = now + kPollInterval;
  int arrived = 0;
  MPI_Message notice = MPI_MESSAGE_NULL;
  MPI_Status status;
  if (MPI_Improbe(MPI_ANY_SOURCE, kFailureTag, comm_, &arrived, &notice, &status) != MPI_SUCCESS || arrived == 0) {
    return failure_;
  }
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  std::string text(static_cast<size_t>(count > 0 ? count : 0), '\0');
  MPI_Mrecv(text.data(), count, MPI_BYTE, &notice, MPI_STATUS_IGNORE);  // matched and eager: local
  failure_ = PeerFailure{status.MPI_SOURCE, std::move(text)};
  return failure_;
}

}  // namespace reshard::mpi_detail
