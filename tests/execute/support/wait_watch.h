// WaitWatch and WatchedTransport: which ranks of one process are blocked in
// their transport, and since when, for a rank that must act only once another
// has waited long enough, by that rank's own entry into the wait rather than
// by a sleep of a guessed length elsewhere.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "forwarding_transport.h"

namespace reshard::testing {

class WaitWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // Blocks until some rank other than `self` has been inside one blocking
  // transport call for `duration`, or until any rank has ended its part
  // (after which waiting further could hang).
  void await_a_wait_of(Clock::duration duration, int self) {
    std::unique_lock lock(mutex_);
    while (!ended_) {
      std::optional<Clock::time_point> earliest;
      for (const auto& [rank, since] : waiting_) {
        if (rank != self && (!earliest || since < *earliest)) earliest = since;
      }
      if (earliest && Clock::now() - *earliest >= duration) return;
      if (earliest) {
        changed_.wait_until(lock, *earliest + duration);
      } else {
        changed_.wait(lock);
      }
    }
  }

  void enter(int rank) { update([&] { waiting_[rank] = Clock::now(); }); }
  void leave(int rank) { update([&] { waiting_.erase(rank); }); }
  void end() { update([&] { ended_ = true; }); }

 private:
  template <class F>
  void update(F&& change) {
    {
      const std::lock_guard lock(mutex_);
      change();
    }
    changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, Clock::time_point> waiting_;
  bool ended_ = false;
};

// Forwards to `inner`, telling `watch` when this rank enters and leaves each
// blocking call: a request's wait and the collectives.
class WatchedTransport final : public ForwardingTransport {
 public:
  WatchedTransport(Transport& inner, WaitWatch& watch) : ForwardingTransport(inner), watch_(watch) {}

  std::unique_ptr<Request> isend(int peer, Tag tag, std::span<const std::byte> data) override {
    return watched(ForwardingTransport::isend(peer, tag, data));
  }
  std::unique_ptr<Request> irecv(int peer, Tag tag, std::span<std::byte> data) override {
    return watched(ForwardingTransport::irecv(peer, tag, data));
  }
  std::unique_ptr<Request> isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                       std::shared_ptr<const void> owner) override {
    return watched(ForwardingTransport::isend_owned(peer, tag, data, std::move(owner)));
  }
  std::unique_ptr<Request> irecv_owned(int peer, Tag tag, std::span<std::byte> data,
                                       std::shared_ptr<const void> owner) override {
    return watched(ForwardingTransport::irecv_owned(peer, tag, data, std::move(owner)));
  }
  std::unique_ptr<Request> isend_gather(int peer, Tag tag, std::span<const ConstByteRun> runs,
                                        std::shared_ptr<const void> owner) override {
    return watched(ForwardingTransport::isend_gather(peer, tag, runs, std::move(owner)));
  }
  std::unique_ptr<Request> irecv_scatter(int peer, Tag tag, std::span<const ByteRun> runs,
                                         std::shared_ptr<const void> owner) override {
    return watched(ForwardingTransport::irecv_scatter(peer, tag, runs, std::move(owner)));
  }
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> local) override {
    const Blocked blocked(*this);
    return ForwardingTransport::all_gather(local);
  }
  void barrier() override {
    const Blocked blocked(*this);
    ForwardingTransport::barrier();
  }
  bool all_equal(uint64_t value) override {
    const Blocked blocked(*this);
    return ForwardingTransport::all_equal(value);
  }

 private:
  // This rank is inside a blocking call while one lives.
  class Blocked {
   public:
    explicit Blocked(WatchedTransport& t) : t_(t) { t_.watch_.enter(t_.rank()); }
    ~Blocked() { t_.watch_.leave(t_.rank()); }
    Blocked(const Blocked&) = delete;
    Blocked& operator=(const Blocked&) = delete;

   private:
    WatchedTransport& t_;
  };

  class WatchedRequest final : public Request {
   public:
    WatchedRequest(std::unique_ptr<Request> inner, WatchedTransport& t) : inner_(std::move(inner)), t_(t) {}
    void wait() override {
      const Blocked blocked(t_);
      inner_->wait();
    }
    bool test() override { return inner_->test(); }

   private:
    std::unique_ptr<Request> inner_;
    WatchedTransport& t_;
  };

  std::unique_ptr<Request> watched(std::unique_ptr<Request> request) {
    return std::make_unique<WatchedRequest>(std::move(request), *this);
  }

  WaitWatch& watch_;
};

}  // namespace reshard::testing
