#include "polled_request.h"

#include <chrono>
#include <exception>
#include <vector>

#include <fmt/format.h>

namespace reshard::mpi_detail {

void PolledRequest::advance_keeping_error() noexcept {
  if (done_ || error_) return;
  try {
    advance();
  } catch (const Error& e) {
    error_ = e;
  } catch (const std::exception& e) {
    error_ = Error(ErrorCode::kTransport, fmt::format("rank {}: {}: {}", engine_.rank(), describe(), e.what()));
  }
}

bool PolledRequest::step() {
  if (error_) throw *error_;
  if (done_) return true;
  try {
    return advance();
  } catch (const Error& e) {
    error_ = e;
    throw;
  }
}

void PolledRequest::wait() {
  engine_.wait(WaitFor{[&] { return step() ? WaitStep::kDone : WaitStep::kIdle; }, [&] { return describe(); },
                       [&] { return waited_peers(); }});
}

bool PolledRequest::test() {
  auto guard = engine_.lock();
  engine_.throw_if_aborted();
  engine_.progress();
  if (step()) return true;
  engine_.throw_if_peer_failed();
  engine_.throw_if_peer_gone(waited_peers(), std::chrono::steady_clock::duration::zero(), [&] { return describe(); });
  return false;
}

}  // namespace reshard::mpi_detail
