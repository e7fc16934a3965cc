#include "progress_engine.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "chunked_request.h"
#include "reshard/layout/error.h"

namespace reshard::mpi_detail {
namespace {

constexpr auto kAnnouncePatience = std::chrono::milliseconds(1000);
constexpr auto kAnnounceLinger = std::chrono::milliseconds(250);

}  // namespace

ProgressEngine::ProgressEngine(int rank, int size, MPI_Comm control, size_t max_bytes_in_flight,
                               std::chrono::milliseconds timeout)
    : rank_(rank), failures_(control, rank, size), max_in_flight_(max_bytes_in_flight),
      timeout_ms_(timeout.count()) {}

void ProgressEngine::add(ChunkedRequest* request) {
  // The latest pending request on the same channel posts first.
  for (auto it = requests_.rbegin(); it != requests_.rend(); ++it) {
    if ((*it)->shares_channel_with(*request)) {
      request->predecessor = *it;
      break;
    }
  }
  requests_.push_back(request);
}

void ProgressEngine::remove(ChunkedRequest* request) {
  for (ChunkedRequest* other : requests_) {
    if (other->predecessor == request) other->predecessor = request->predecessor;
  }
  std::erase(requests_, request);
}

void ProgressEngine::progress() {
  for (ChunkedRequest* request : requests_) request->advance();
  failures_.poll();
}

void ProgressEngine::throw_if_aborted() const {
  if (aborted_) {
    throw Error(ErrorCode::kPeerFailed, fmt::format("rank {}: this rank failed: {}", rank_, *aborted_));
  }
}

void ProgressEngine::throw_if_peer_failed() {
  throw_if_aborted();
  if (const auto& failure = failures_.poll()) {
    throw Error(ErrorCode::kPeerFailed,
                fmt::format("rank {}: peer rank {} failed: {}", rank_, failure->rank, failure->message));
  }
}

bool ProgressEngine::take_budget(size_t bytes, bool always) {
  if (!always && in_flight_ + bytes > max_in_flight_) return false;
  in_flight_ += bytes;
  if (in_flight_ > peak_in_flight_.load()) peak_in_flight_.store(in_flight_);
  return true;
}

void ProgressEngine::give_back_budget(size_t bytes) { in_flight_ -= std::min(bytes, in_flight_); }

void ProgressEngine::wait(const std::function<WaitStep()>& step,
                          const std::function<std::string()>& waiting_for) {
  auto last_progress = std::chrono::steady_clock::now();
  while (true) {
    {
      auto guard = lock();
      throw_if_aborted();
      progress();
      const WaitStep result = step();
      if (result == WaitStep::kDone) return;
      throw_if_peer_failed();
      const auto now = std::chrono::steady_clock::now();
      if (result == WaitStep::kProgressed) {
        last_progress = now;
      } else if (now - last_progress > timeout()) {
        throw Error(ErrorCode::kTimeout,
                    fmt::format("rank {}: no progress for {} ms while {} (has that rank failed or stopped?)",
                                rank_, timeout().count(), waiting_for()));
      }
    }
    // Give the core away between looks: ranks often outnumber cores.
    std::this_thread::yield();
  }
}

void ProgressEngine::keep_alive(std::shared_ptr<void> resource) {
  auto guard = lock();
  keep_alive_locked(std::move(resource));
}

void ProgressEngine::abort(std::string_view reason) noexcept {
  try {
    auto guard = lock();
    if (aborted_) return;
    aborted_ = std::string(reason);
    failures_.announce(reason, kAnnouncePatience, kAnnounceLinger);
  } catch (...) {
    // Locking or copying failed: nothing more can be done on the way out.
  }
}

}  // namespace reshard::mpi_detail
