#include "reshard/execute/tcp_transport.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "execute/tcp/engine.h"
#include "execute/tcp/rendezvous.h"
#include "execute/tcp/same_host_probe.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

using tcp_detail::Engine;
using tcp_detail::Op;

// Collectives' messages carry tags with the top bit set, which
// begin_operation never hands out.
constexpr Tag kCollectiveTag = Tag{1} << 63;

class TcpRequest final : public Request {
 public:
  TcpRequest(std::shared_ptr<Engine> engine, std::shared_ptr<Op> op) : engine_(std::move(engine)), op_(std::move(op)) {}
  ~TcpRequest() override { engine_->withdraw(op_); }
  TcpRequest(const TcpRequest&) = delete;
  TcpRequest& operator=(const TcpRequest&) = delete;

  void wait() override { engine_->wait(*op_); }
  bool test() override { return engine_->test(*op_); }
  Op& op() { return *op_; }

 private:
  std::shared_ptr<Engine> engine_;
  std::shared_ptr<Op> op_;
};

std::vector<std::string> labels_of(const tcp_detail::JoinedJob& job) {
  std::vector<std::string> labels;
  for (size_t rank = 0; rank < job.peers.size(); ++rank) {
    labels.push_back(fmt::format("rank {} ({}, {})", rank, job.peers[rank].host_name, job.peers[rank].address));
  }
  return labels;
}

// Hosts numbered 0..H-1 in the order of their lowest rank.
std::vector<int> number_hosts(const tcp_detail::JoinedJob& job) {
  std::vector<int> host_of;
  std::vector<std::string> keys;
  for (const auto& peer : job.peers) {
    const auto found = std::find(keys.begin(), keys.end(), peer.host_key);
    host_of.push_back(static_cast<int>(found - keys.begin()));
    if (found == keys.end()) keys.push_back(peer.host_key);
  }
  return host_of;
}

}  // namespace

struct TcpTransport::Job {
  std::vector<std::string> labels;
  std::vector<int> host_of;
  std::vector<pid_t> readable_pids;
};

TcpTransport::TcpTransport(const TcpTransportOptions& options) : rank_(options.rank), size_(options.size) {
  tcp_detail::JoinedJob joined = tcp_detail::join_job(options);
  auto pids = tcp_detail::probe_same_host_peers(joined, rank_, options.single_copy, options.timeout);
  job_ = std::make_unique<Job>(Job{labels_of(joined), number_hosts(joined), pids});
  engine_ = std::make_shared<Engine>(rank_, std::move(joined.connections), job_->labels, std::move(pids),
                                     options.timeout);
}

TcpTransport::~TcpTransport() = default;

int TcpTransport::rank() const { return rank_; }
int TcpTransport::size() const { return size_; }

void TcpTransport::check_peer(int peer) const {
  if (peer < 0 || peer >= size_) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("peer {} is not a rank of this job of {}", peer, size_));
  }
}

std::unique_ptr<Request> TcpTransport::isend(int peer, Tag tag, std::span<const std::byte> data) {
  return isend_owned(peer, tag, data, nullptr);
}

std::unique_ptr<Request> TcpTransport::irecv(int peer, Tag tag, std::span<std::byte> data) {
  return irecv_owned(peer, tag, data, nullptr);
}

std::unique_ptr<Request> TcpTransport::isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                                   std::shared_ptr<const void> owner) {
  check_peer(peer);
  return std::make_unique<TcpRequest>(engine_, engine_->send(peer, tag, data, std::move(owner)));
}

std::unique_ptr<Request> TcpTransport::irecv_owned(int peer, Tag tag, std::span<std::byte> data,
                                                   std::shared_ptr<const void> owner) {
  check_peer(peer);
  return std::make_unique<TcpRequest>(engine_, engine_->receive(peer, tag, data, std::move(owner)));
}

std::vector<std::vector<std::byte>> TcpTransport::all_gather(std::span<const std::byte> local) {
  const Tag tag = kCollectiveTag | collectives_++;
  std::vector<std::unique_ptr<TcpRequest>> receives(static_cast<size_t>(size_));
  std::vector<std::unique_ptr<TcpRequest>> sends;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    receives[static_cast<size_t>(peer)] =
        std::make_unique<TcpRequest>(engine_, engine_->receive_any_size(peer, tag));
  }
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) sends.push_back(std::make_unique<TcpRequest>(engine_, engine_->send(peer, tag, local, nullptr, false)));
  }
  std::vector<std::vector<std::byte>> all(static_cast<size_t>(size_));
  all[static_cast<size_t>(rank_)].assign(local.begin(), local.end());
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    TcpRequest& receive = *receives[static_cast<size_t>(peer)];
    receive.wait();
    all[static_cast<size_t>(peer)] = std::move(receive.op().owned);
  }
  for (auto& send : sends) send->wait();
  return all;
}

void TcpTransport::barrier() { all_gather({}); }

bool TcpTransport::all_equal(uint64_t value) {
  std::byte bytes[sizeof value];
  std::memcpy(bytes, &value, sizeof value);
  for (const auto& other : all_gather(bytes)) {
    if (other.size() != sizeof value || std::memcmp(other.data(), bytes, sizeof value) != 0) return false;
  }
  return true;
}

TransportCounters TcpTransport::counters() const { return engine_->counters(); }

Tag TcpTransport::begin_operation() { return operations_++ * kTagsPerOperation; }

void TcpTransport::abort(std::string_view reason) noexcept { engine_->abort(reason); }

void TcpTransport::set_timeout(std::chrono::milliseconds timeout) { engine_->set_timeout(timeout); }

std::chrono::milliseconds TcpTransport::timeout() const { return engine_->timeout(); }

int TcpTransport::processes_on_this_host() const {
  const int mine = job_->host_of[static_cast<size_t>(rank_)];
  return static_cast<int>(std::count(job_->host_of.begin(), job_->host_of.end(), mine));
}

FastPaths TcpTransport::fast_paths() { return {.owned = this, .host = this}; }

int TcpTransport::host_of(int rank) const {
  check_peer(rank);
  return job_->host_of[static_cast<size_t>(rank)];
}

bool TcpTransport::reads_across(int rank) const {
  check_peer(rank);
  return job_->readable_pids[static_cast<size_t>(rank)] != 0;
}

bool TcpTransport::gave_up_on_a_peer() { return tcp_detail::gave_up_on_a_peer(); }

std::string TcpTransport::label_of(int rank) const {
  check_peer(rank);
  return job_->labels[static_cast<size_t>(rank)];
}

}  // namespace reshard
