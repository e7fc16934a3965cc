#include "progress_engine.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "segmented_request.h"
#include "direct_request.h"
#include "given_up_peers.h"
#include "orphans.h"
#include "polled_request.h"
#include "reshard/layout/error.h"

namespace reshard::mpi_detail {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kAnnouncePatience = std::chrono::milliseconds(1000);
constexpr auto kAnnounceLinger = std::chrono::milliseconds(250);
// How long a wait on a peer that said goodbye goes on without progress
// before it fails: messages it sent just before may still be on the way.
constexpr auto kGoodbyeGrace = std::chrono::milliseconds(1000);
// Looks poll without sleeping until no request has completed anything for
// this long (a peer descheduled on a loaded machine, or not there yet); then
// they sleep 10 us, doubling up to 1 ms: short waits stay fast, long ones
// cost next to no CPU.
constexpr auto kPollStretch = std::chrono::milliseconds(5);
constexpr auto kFirstSleep = std::chrono::microseconds(10);
constexpr auto kLongestSleep = std::chrono::microseconds(1000);

int64_t as_ms(Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

}  // namespace

ProgressEngine::ProgressEngine(int rank, int size, MPI_Comm control, MPI_Comm heartbeat,
                               size_t max_bytes_in_flight, std::chrono::milliseconds timeout)
    : rank_(rank), failures_(control, rank, size), heartbeats_(heartbeat, rank, size),
      max_in_flight_(max_bytes_in_flight), timeout_ms_(timeout.count()) {}

void ProgressEngine::add(SegmentedRequest* request) {
  // The latest pending request on the same channel posts first.
  for (auto it = requests_.rbegin(); it != requests_.rend(); ++it) {
    if ((*it)->shares_channel_with(*request)) {
      request->predecessor = *it;
      break;
    }
  }
  requests_.push_back(request);
}

void ProgressEngine::remove(SegmentedRequest* request) {
  for (SegmentedRequest* other : requests_) {
    if (other->predecessor == request) other->predecessor = request->predecessor;
  }
  std::erase(requests_, request);
}

void ProgressEngine::add(PolledRequest* request) { polled_.push_back(request); }

void ProgressEngine::remove(PolledRequest* request) { std::erase(polled_, request); }

void ProgressEngine::add(DirectRequest* request) {
  add(static_cast<PolledRequest*>(request));
  direct_[request->channel_key()].push_back(request);
}

void ProgressEngine::remove(DirectRequest* request) {
  remove(static_cast<PolledRequest*>(request));
  const auto channel = direct_.find(request->channel_key());
  if (channel == direct_.end()) return;
  std::erase(channel->second, request);
  if (channel->second.empty()) direct_.erase(channel);
}

bool ProgressEngine::first_awaiting(const DirectRequest* request) const {
  const auto channel = direct_.find(request->channel_key());
  if (channel == direct_.end()) return true;
  for (const DirectRequest* other : channel->second) {
    if (other == request) return true;
    if (other->awaiting() == request->awaiting()) return false;
  }
  return true;
}

void ProgressEngine::progress() {
  for (SegmentedRequest* request : requests_) request->advance();
  for (PolledRequest* request : polled_) request->advance_keeping_error();
  failures_.poll();
  // Waiting ranks beat too (rate-limited), in case there is no heartbeat thread.
  const auto now = Clock::now();
  heartbeats_.listen(now);
  heartbeats_.beat(now);
  Orphans::instance().reap();
}

void ProgressEngine::throw_if_aborted() const {
  if (aborted_) {
    GivenUpPeers::note(false);
    throw Error(ErrorCode::kPeerFailed, fmt::format("rank {}: this rank failed: {}", rank_, *aborted_));
  }
}

void ProgressEngine::throw_if_peer_failed() {
  throw_if_aborted();
  if (const auto& failure = failures_.poll()) {
    GivenUpPeers::note(false);
    throw Error(ErrorCode::kPeerFailed,
                fmt::format("rank {}: peer rank {} failed: {}", rank_, failure->rank, failure->message));
  }
}

std::string ProgressEngine::where(int peer) const {
  const auto index = static_cast<size_t>(peer);
  return index < host_labels_.size() ? " on " + host_labels_[index] : std::string();
}

void ProgressEngine::throw_if_peer_gone(const std::vector<int>& peers, Clock::duration idle,
                                        const std::function<std::string()>& describe) {
  const auto now = Clock::now();
  for (int peer : peers) {
    const auto silent = heartbeats_.silent_for(peer, now);
    if (silent > timeout()) {
      GivenUpPeers::note(true);
      throw Error(ErrorCode::kTimeout,
                  fmt::format("rank {}: rank {} has been silent for {} ms (timeout {} ms){} while {}: has it died, "
                              "hung, or lost its network?",
                              rank_, peer, as_ms(silent), timeout().count(), where(peer), describe()));
    }
    if (heartbeats_.left(peer) && idle > std::min<Clock::duration>(kGoodbyeGrace, timeout())) {
      GivenUpPeers::note(false);
      throw Error(ErrorCode::kPeerFailed,
                  fmt::format("rank {}: rank {} closed its transport while {}", rank_, peer, describe()));
    }
  }
}

bool ProgressEngine::take_budget(size_t bytes, bool always) {
  if (!always && in_flight_ + bytes > max_in_flight_) return false;
  in_flight_ += bytes;
  if (in_flight_ > peak_in_flight_.load()) peak_in_flight_.store(in_flight_);
  return true;
}

void ProgressEngine::give_back_budget(size_t bytes) { in_flight_ -= std::min(bytes, in_flight_); }

void ProgressEngine::wait(const WaitFor& what) {
  {
    // Done already (an earlier round completed it): no round of its own. A
    // caller retiring finished requests one by one would otherwise pay a
    // round of every pending request's polling for each.
    auto guard = lock();
    throw_if_aborted();
    if (what.step() == WaitStep::kDone) return;
  }
  auto last_progress = Clock::now();  // of this wait's own condition: for liveness
  auto last_completion = last_progress;  // of any request: whether to keep polling
  uint64_t completions_seen = completions_.load();
  auto sleep = kFirstSleep;
  while (true) {
    bool polling = true;
    {
      auto guard = lock();
      throw_if_aborted();
      progress();
      const WaitStep result = what.step();
      if (result == WaitStep::kDone) return;
      throw_if_peer_failed();
      const auto now = Clock::now();
      if (completions_ != completions_seen || result == WaitStep::kProgressed) {
        completions_seen = completions_;
        last_completion = now;
        sleep = kFirstSleep;
      }
      if (result == WaitStep::kProgressed) {
        last_progress = now;
      } else {
        throw_if_peer_gone(what.peers(), now - last_progress, what.describe);
      }
      polling = now - last_completion < kPollStretch;
    }
    if (polling) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, kLongestSleep);
    }
  }
}

void ProgressEngine::heartbeat() {
  {
    auto guard = lock();
    const auto now = Clock::now();
    heartbeats_.listen(now);
    heartbeats_.beat(now);
    failures_.poll();
  }
  Orphans::instance().reap();
}

void ProgressEngine::say_goodbye() noexcept {
  try {
    auto guard = lock();
    heartbeats_.say_goodbye();
  } catch (...) {
    // Locking failed on the way out: peers will notice the silence instead.
  }
}

void ProgressEngine::abort(std::string_view reason) noexcept {
  try {
    {
      auto guard = lock();
      if (aborted_) return;
      aborted_ = std::string(reason);
      failures_.post(reason);
    }
    const auto deadline = Clock::now() + kAnnouncePatience;
    while (Clock::now() < deadline) {
      {
        auto guard = lock();
        if (failures_.posted_all_out()) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Peers poll for notices every millisecond while they wait: give them
    // the time to report it before a caller tears the job down.
    std::this_thread::sleep_for(kAnnounceLinger);
  } catch (...) {
    // Locking or copying failed: nothing more can be done on the way out.
  }
}

}  // namespace reshard::mpi_detail
