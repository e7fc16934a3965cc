#include "group_state.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace reshard::in_process_detail {

GroupState::GroupState(int size)
    : size_(size),
      bytes_sent_(static_cast<size_t>(size)),
      messages_sent_(static_cast<size_t>(size)),
      bytes_received_(static_cast<size_t>(size)),
      messages_received_(static_cast<size_t>(size)),
      left_(static_cast<size_t>(size), false),
      silent_since_(static_cast<size_t>(size)) {}

GroupState::Key GroupState::key_of(const Operation& op) {
  return op.is_send ? Key{op.rank, op.peer, op.tag} : Key{op.peer, op.rank, op.tag};
}

void GroupState::deliver(Operation& send, Operation& recv) {
  if (send.size != recv.size) {
    const std::string message =
        fmt::format("message from process {} to process {} with tag {} has {} bytes, but the receive expects {}",
                    send.rank, recv.rank, send.tag, send.size, recv.size);
    // Two errors, not copies of one: the two ranks' threads own them.
    send.error.emplace(ErrorCode::kTransport, message);
    recv.error.emplace(ErrorCode::kTransport, message);
    return;
  }
  if (send.size > 0) std::memcpy(recv.recv_data, send.send_data, send.size);
}

void GroupState::post(const std::shared_ptr<Operation>& op) {
  std::unique_lock lock(mutex_);
  if (failure_) {
    finish_with(*op, failure_error());
    return;
  }
  Queue& others = op->is_send ? unmatched_recvs_ : unmatched_sends_;
  const auto match = others.find(key_of(*op));
  if (match == others.end()) {
    (op->is_send ? unmatched_sends_ : unmatched_recvs_)[key_of(*op)].push_back(op);
    return;
  }
  const std::shared_ptr<Operation> peer = match->second.front();
  match->second.pop_front();
  if (match->second.empty()) others.erase(match);
  op->phase = peer->phase = Operation::Phase::kCopying;
  count_delivery(op->is_send ? *op : *peer, op->is_send ? *peer : *op);
  lock.unlock();
  // The copy runs unlocked so that ranks move data in parallel.
  op->is_send ? deliver(*op, *peer) : deliver(*peer, *op);
  lock.lock();
  op->phase = peer->phase = Operation::Phase::kDone;
  changed_.notify_all();
}

void GroupState::wait(Operation& op, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const int peers[] = {op.peer};
  while (true) {
    switch (op.phase) {
      case Operation::Phase::kDone:
        if (op.error) throw *op.error;
        return;
      case Operation::Phase::kCopying:
        changed_.wait(lock);
        break;
      case Operation::Phase::kPosted:
        if (auto error = peer_gone(op.rank, peers, timeout, describe(op))) {
          withdraw(op);
          finish_with(op, std::move(*error));
          throw *op.error;
        }
        sleep_on(lock, peers, timeout);
        break;
    }
  }
}

bool GroupState::test(Operation& op, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const int peers[] = {op.peer};
  if (op.phase == Operation::Phase::kPosted) {
    if (auto error = peer_gone(op.rank, peers, timeout, describe(op))) {
      withdraw(op);
      finish_with(op, std::move(*error));
    }
  }
  if (op.phase != Operation::Phase::kDone) return false;
  if (op.error) throw *op.error;
  return true;
}

void GroupState::release(Operation& op) noexcept {
  std::unique_lock lock(mutex_);
  if (op.phase == Operation::Phase::kPosted) withdraw(op);
  changed_.wait(lock, [&] { return op.phase != Operation::Phase::kCopying; });
}

void GroupState::withdraw(Operation& op) {
  Queue& queue = op.is_send ? unmatched_sends_ : unmatched_recvs_;
  const auto it = queue.find(key_of(op));
  if (it == queue.end()) return;
  std::erase_if(it->second, [&](const std::shared_ptr<Operation>& p) { return p.get() == &op; });
  if (it->second.empty()) queue.erase(it);
}

void GroupState::finish_with(Operation& op, Error error) {
  op.phase = Operation::Phase::kDone;
  op.error = std::move(error);
}

std::vector<std::vector<std::byte>> GroupState::all_gather(int rank, uint64_t generation,
                                                           std::span<const std::byte> local,
                                                           std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (failure_) throw failure_error();
  Gathering& gathering = gatherings_[generation];  // map nodes stay put while others are added
  gathering.parts.resize(static_cast<size_t>(size_));
  gathering.present.resize(static_cast<size_t>(size_), false);
  gathering.parts[static_cast<size_t>(rank)].assign(local.begin(), local.end());
  gathering.present[static_cast<size_t>(rank)] = true;
  ++gathering.arrived;
  changed_.notify_all();
  while (gathering.arrived < size_) {
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (!gathering.present[static_cast<size_t>(r)]) missing.push_back(r);
    }
    if (auto error = peer_gone(rank, missing, timeout, fmt::format("gathering metadata (all_gather {})", generation))) {
      throw *error;
    }
    sleep_on(lock, missing, timeout);
  }
  std::vector<std::vector<std::byte>> parts = gathering.parts;
  if (++gathering.left == size_) gatherings_.erase(generation);
  return parts;
}

void GroupState::mark_failed(int rank, std::string_view reason) {
  std::lock_guard lock(mutex_);
  if (!failure_) failure_.emplace(rank, std::string(reason));
  changed_.notify_all();
}

void GroupState::leave(int rank) {
  std::lock_guard lock(mutex_);
  left_.at(static_cast<size_t>(rank)) = true;
  changed_.notify_all();
}

void GroupState::go_silent(int rank) {
  std::lock_guard lock(mutex_);
  silent_since_.at(static_cast<size_t>(rank)) = Clock::now();
  changed_.notify_all();
}

std::optional<Error> GroupState::peer_gone(int rank, std::span<const int> peers, std::chrono::milliseconds timeout,
                                           const std::string& what) const {
  if (failure_) return failure_error();
  const auto now = Clock::now();
  for (int peer : peers) {
    const auto p = static_cast<size_t>(peer);
    if (left_[p]) {
      return Error(ErrorCode::kPeerFailed,
                   fmt::format("process {} left the job while process {} was {}", peer, rank, what));
    }
    if (silent_since_[p] && now - *silent_since_[p] >= timeout) {
      const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - *silent_since_[p]);
      return Error(ErrorCode::kTimeout,
                   fmt::format("process {}: process {} has been silent for {} ms (timeout {} ms) while {}: has it "
                               "died or hung?",
                               rank, peer, silent.count(), timeout.count(), what));
    }
  }
  return std::nullopt;
}

void GroupState::sleep_on(std::unique_lock<std::mutex>& lock, std::span<const int> peers,
                          std::chrono::milliseconds timeout) {
  std::optional<Clock::time_point> deadline;
  for (int peer : peers) {
    if (const auto& since = silent_since_[static_cast<size_t>(peer)]) {
      const Clock::time_point at = *since + timeout;
      if (!deadline || at < *deadline) deadline = at;
    }
  }
  if (deadline) {
    changed_.wait_until(lock, *deadline);
  } else {
    changed_.wait(lock);
  }
}

std::string GroupState::describe(const Operation& op) {
  return fmt::format("{} {} bytes {} process {} (tag {})", op.is_send ? "sending" : "receiving", op.size,
                     op.is_send ? "to" : "from", op.peer, op.tag);
}

Error GroupState::failure_error() const {
  return Error(ErrorCode::kPeerFailed, fmt::format("process {} failed: {}", failure_->first, failure_->second));
}

void GroupState::count_delivery(const Operation& send, const Operation& recv) {
  if (send.size != recv.size) return;
  bytes_sent_[static_cast<size_t>(send.rank)] += send.size;
  ++messages_sent_[static_cast<size_t>(send.rank)];
  bytes_received_[static_cast<size_t>(recv.rank)] += recv.size;
  ++messages_received_[static_cast<size_t>(recv.rank)];
}

uint64_t GroupState::bytes_received(int rank) const {
  std::lock_guard lock(mutex_);
  return bytes_received_.at(static_cast<size_t>(rank));
}

uint64_t GroupState::bytes_sent(int rank) const {
  std::lock_guard lock(mutex_);
  return bytes_sent_.at(static_cast<size_t>(rank));
}

uint64_t GroupState::messages_sent(int rank) const {
  std::lock_guard lock(mutex_);
  return messages_sent_.at(static_cast<size_t>(rank));
}

TransportCounters GroupState::counters(int rank) const {
  std::lock_guard lock(mutex_);
  const auto r = static_cast<size_t>(rank);
  return TransportCounters{bytes_sent_.at(r), bytes_received_.at(r), messages_sent_.at(r), messages_received_.at(r)};
}

}  // namespace reshard::in_process_detail
