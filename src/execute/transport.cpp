// Transport's defaults: owned calls forward to the plain ones; gather and scatter pack into, or unpack from, one staging buffer.
#include "reshard/execute/transport.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "run_bytes.h"
#include "staging_cache.h"

namespace reshard {
namespace {

// A request over a staging buffer, which goes back to the cache at the end.
// The inner request is declared after the buffer so that it ends first.
class StagedRequest final : public Request {
 public:
  StagedRequest(Buffer staging, std::vector<ByteRun> scatter_to)
      : staging_(std::move(staging)), scatter_to_(std::move(scatter_to)) {}
  ~StagedRequest() override {
    inner.reset();
    // A request that failed may leave its buffer (a share of its owner) to
    // the transport: not reused, freed once the transport lets go.
    if (done_) StagingCache::for_process().give_back(std::move(staging_));
  }
  StagedRequest(const StagedRequest&) = delete;
  StagedRequest& operator=(const StagedRequest&) = delete;

  void wait() override {
    inner->wait();
    finish();
  }
  bool test() override {
    if (!inner->test()) return false;
    finish();
    return true;
  }

  Buffer& staging() { return staging_; }
  std::unique_ptr<Request> inner;

 private:
  // Scatters a received message once.
  void finish() {
    const std::byte* in = staging_.data();
    for (const ByteRun& run : scatter_to_) {
      if (run.size > 0) std::memcpy(run.data, in, run.size);
      in += run.size;
    }
    scatter_to_.clear();
    done_ = true;
  }

  Buffer staging_;
  std::vector<ByteRun> scatter_to_;
  bool done_ = false;
};

}  // namespace

// A transport that never touches a span after its request ends has no use
// for the owner: the plain calls are already safe.
std::unique_ptr<Request> Transport::isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                                std::shared_ptr<const void> /*owner*/) {
  return isend(peer, tag, data);
}

std::unique_ptr<Request> Transport::irecv_owned(int peer, Tag tag, std::span<std::byte> data,
                                                std::shared_ptr<const void> /*owner*/) {
  return irecv(peer, tag, data);
}

// The runs are copied into (out of) the staging buffer, which is all the
// transport touches: its owner, not the runs', goes with the request.
std::unique_ptr<Request> Transport::isend_gather(int peer, Tag tag, std::span<const ConstByteRun> runs,
                                                 std::shared_ptr<const void> /*owner*/) {
  auto request = std::make_unique<StagedRequest>(StagingCache::for_process().take(total_bytes(runs)),
                                                 std::vector<ByteRun>{});
  std::byte* out = request->staging().data();
  for (const ConstByteRun& run : runs) {
    if (run.size > 0) std::memcpy(out, run.data, run.size);
    out += run.size;
  }
  const Buffer& staging = request->staging();
  request->inner = isend_owned(peer, tag, staging.bytes(), staging.owner());
  return request;
}

std::vector<std::unique_ptr<Request>> Transport::isend_gather_all(std::span<const GatherSend> sends,
                                                                 int /*threads*/) {
  std::vector<std::unique_ptr<Request>> requests;
  requests.reserve(sends.size());
  for (const GatherSend& send : sends) {
    const std::vector<ConstByteRun> runs = runs_of(send.rows);
    requests.push_back(runs.size() == 1 ? isend_owned(send.peer, send.tag, {runs[0].data, runs[0].size}, send.owner)
                                        : isend_gather(send.peer, send.tag, runs, send.owner));
  }
  return requests;
}

namespace {

// A request that is done from the start.
class DoneRequest final : public Request {
 public:
  void wait() override {}
  bool test() override { return true; }
};

// The bytes of `from`'s runs into `to`'s, in order (both hold the same bytes).
void copy_runs(std::span<const ConstByteRun> from, std::span<const ByteRun> to) {
  size_t i = 0, j = 0, in_from = 0, in_to = 0;
  while (i < from.size() && j < to.size()) {
    const size_t n = std::min(from[i].size - in_from, to[j].size - in_to);
    if (n > 0) std::memcpy(to[j].data + in_to, from[i].data + in_from, n);
    in_from += n;
    in_to += n;
    if (in_from == from[i].size) ++i, in_from = 0;
    if (in_to == to[j].size) ++j, in_to = 0;
  }
}

}  // namespace

std::vector<std::unique_ptr<Request>> Transport::isend_gather_all_with_copies(std::span<const GatherSend> sends,
                                                                             int threads,
                                                                             std::span<const LocalCopy> copies) {
  for (const LocalCopy& copy : copies) copy_runs(runs_of(copy.from), runs_of(copy.to));
  std::vector<std::unique_ptr<Request>> requests = isend_gather_all(sends, threads);
  requests.push_back(std::make_unique<DoneRequest>());
  return requests;
}

std::unique_ptr<Request> Transport::irecv_scatter_rows(int peer, Tag tag, std::span<const RunRows> rows,
                                                       std::shared_ptr<const void> owner) {
  const std::vector<ByteRun> runs = runs_of(rows);
  return runs.size() == 1 ? irecv_owned(peer, tag, {runs[0].data, runs[0].size}, std::move(owner))
                          : irecv_scatter(peer, tag, runs, std::move(owner));
}

std::unique_ptr<Request> Transport::irecv_scatter(int peer, Tag tag, std::span<const ByteRun> runs,
                                                  std::shared_ptr<const void> /*owner*/) {
  auto request = std::make_unique<StagedRequest>(StagingCache::for_process().take(total_bytes(runs)),
                                                 std::vector<ByteRun>(runs.begin(), runs.end()));
  request->inner = irecv_owned(peer, tag, request->staging().bytes(), request->staging().owner());
  return request;
}

}  // namespace reshard
