#include "reshard/execute/in_process_transport.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "group_state.h"
#include "reshard/execute/fast_paths.h"

namespace reshard {
namespace in_process_detail {
namespace {

class InProcessRequest final : public Request {
 public:
  InProcessRequest(std::shared_ptr<GroupState> group, std::shared_ptr<Operation> op,
                   std::chrono::milliseconds timeout)
      : group_(std::move(group)), op_(std::move(op)), timeout_(timeout) {}
  ~InProcessRequest() override { group_->release(*op_); }
  InProcessRequest(const InProcessRequest&) = delete;
  InProcessRequest& operator=(const InProcessRequest&) = delete;

  void wait() override { group_->wait(*op_, timeout_); }
  bool test() override { return group_->test(*op_, timeout_); }

 private:
  std::shared_ptr<GroupState> group_;
  std::shared_ptr<Operation> op_;
  std::chrono::milliseconds timeout_;
};

class InProcessTransport final : public Transport, public HostTopology {
 public:
  InProcessTransport(std::shared_ptr<GroupState> group, int rank, std::chrono::milliseconds timeout)
      : group_(std::move(group)), rank_(rank), timeout_(timeout) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  std::unique_ptr<Request> isend(int peer, Tag tag, std::span<const std::byte> data) override {
    auto op = make_operation(peer, tag, true, data.size());
    op->send_data = data.data();
    return start(std::move(op));
  }

  std::unique_ptr<Request> irecv(int peer, Tag tag, std::span<std::byte> data) override {
    auto op = make_operation(peer, tag, false, data.size());
    op->recv_data = data.data();
    return start(std::move(op));
  }

  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> local) override {
    return group_->all_gather(rank_, next_gathering_++, local, timeout_);
  }

  void barrier() override { all_gather({}); }

  // One gathering in shared memory (no messages), compared here.
  bool all_equal(uint64_t value) override {
    std::array<std::byte, sizeof value> mine{};
    std::memcpy(mine.data(), &value, sizeof value);
    const auto all = all_gather(mine);
    return std::all_of(all.begin(), all.end(), [&](const std::vector<std::byte>& theirs) {
      return theirs.size() == mine.size() && std::memcmp(theirs.data(), mine.data(), mine.size()) == 0;
    });
  }

  TransportCounters counters() const override { return group_->counters(rank_); }

  Tag begin_operation() override { return next_operation_++ * kTagsPerOperation; }

  void abort(std::string_view reason) noexcept override { group_->mark_failed(rank_, reason); }

  void set_timeout(std::chrono::milliseconds timeout) override {
    if (timeout.count() <= 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("timeout {} ms must be positive", timeout.count()));
    }
    timeout_ = timeout;
  }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  // Every rank is a thread of this one process.
  int processes_on_this_host() const override { return group_->size(); }
  FastPaths fast_paths() override { return {.host = this}; }

 private:
  std::shared_ptr<Operation> make_operation(int peer, Tag tag, bool is_send, size_t bytes) const {
    if (peer < 0 || peer >= size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("process {}: peer {} is not a process of this {}-process job", rank_, peer, size()));
    }
    auto op = std::make_shared<Operation>();
    op->rank = rank_;
    op->peer = peer;
    op->tag = tag;
    op->is_send = is_send;
    op->size = bytes;
    return op;
  }

  std::unique_ptr<Request> start(std::shared_ptr<Operation> op) {
    group_->post(op);
    return std::make_unique<InProcessRequest>(group_, std::move(op), timeout_);
  }

  std::shared_ptr<GroupState> group_;
  int rank_;
  std::chrono::milliseconds timeout_;
  uint64_t next_gathering_ = 0;
  Tag next_operation_ = 0;
};

}  // namespace
}  // namespace in_process_detail

InProcessGroup::InProcessGroup(int size, std::chrono::milliseconds timeout) {
  if (size < 1) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("an in-process group needs at least 1 rank, not {}", size));
  }
  if (timeout.count() <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("an in-process group's timeout must be positive, not {} ms", timeout.count()));
  }
  state_ = std::make_shared<in_process_detail::GroupState>(size);
  for (int rank = 0; rank < size; ++rank) {
    transports_.push_back(std::make_unique<in_process_detail::InProcessTransport>(state_, rank, timeout));
  }
}

InProcessGroup::~InProcessGroup() = default;

int InProcessGroup::size() const { return state_->size(); }

Transport& InProcessGroup::transport(int rank) {
  return *transports_[static_cast<size_t>(checked_rank(rank))];
}

void InProcessGroup::mark_failed(int rank, std::string_view reason) { state_->mark_failed(rank, reason); }
void InProcessGroup::leave(int rank) { state_->leave(checked_rank(rank)); }
void InProcessGroup::go_silent(int rank) { state_->go_silent(checked_rank(rank)); }

int InProcessGroup::checked_rank(int rank) const {
  if (rank < 0 || rank >= size()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("rank {} is not in a group of {}", rank, size()));
  }
  return rank;
}

uint64_t InProcessGroup::bytes_sent(int rank) const { return state_->bytes_sent(rank); }
uint64_t InProcessGroup::messages_sent(int rank) const { return state_->messages_sent(rank); }
uint64_t InProcessGroup::bytes_received(int rank) const { return state_->bytes_received(rank); }

}  // namespace reshard
