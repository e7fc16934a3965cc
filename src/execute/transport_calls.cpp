// The calls beyond Transport's core: a fast path where the transport has one;
// otherwise owned calls forward to the plain ones, and gather and scatter pack
// into, or unpack from, one staging buffer.
#include "reshard/execute/transport_calls.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "run_bytes.h"
#include "staging_cache.h"

namespace reshard {

using execute_detail::StagingCache;
using execute_detail::runs_of;
using execute_detail::total_bytes;

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

FastPaths Transport::fast_paths() { return {}; }

// A transport that never touches a span after its request ends has no use
// for the owner: the plain calls are already safe.
std::unique_ptr<Request> isend_owned(Transport& transport, int peer, Tag tag, std::span<const std::byte> data,
                                     std::shared_ptr<const void> owner) {
  if (OwnedTransfers* owned = transport.fast_paths().owned) return owned->isend_owned(peer, tag, data, std::move(owner));
  return transport.isend(peer, tag, data);
}

std::unique_ptr<Request> irecv_owned(Transport& transport, int peer, Tag tag, std::span<std::byte> data,
                                     std::shared_ptr<const void> owner) {
  if (OwnedTransfers* owned = transport.fast_paths().owned) return owned->irecv_owned(peer, tag, data, std::move(owner));
  return transport.irecv(peer, tag, data);
}

std::unique_ptr<Request> isend_gather(Transport& transport, int peer, Tag tag, std::span<const ConstByteRun> runs,
                                      std::shared_ptr<const void> owner) {
  if (RunTransfers* fast = transport.fast_paths().runs) return fast->isend_gather(peer, tag, runs, std::move(owner));
  return without_fast_path::isend_gather(transport, peer, tag, runs);
}

std::unique_ptr<Request> irecv_scatter(Transport& transport, int peer, Tag tag, std::span<const ByteRun> runs,
                                       std::shared_ptr<const void> owner) {
  if (RunTransfers* fast = transport.fast_paths().runs) return fast->irecv_scatter(peer, tag, runs, std::move(owner));
  return without_fast_path::irecv_scatter(transport, peer, tag, runs);
}

std::unique_ptr<Request> irecv_scatter_rows(Transport& transport, int peer, Tag tag, std::span<const RunRows> rows,
                                            std::shared_ptr<const void> owner) {
  if (RunTransfers* fast = transport.fast_paths().runs) {
    return fast->irecv_scatter_rows(peer, tag, rows, std::move(owner));
  }
  return without_fast_path::irecv_scatter_rows(transport, peer, tag, rows, std::move(owner));
}

std::vector<std::unique_ptr<Request>> isend_gather_all(Transport& transport, std::span<const GatherSend> sends,
                                                       int threads) {
  if (RunTransfers* fast = transport.fast_paths().runs) return fast->isend_gather_all(sends, threads);
  return without_fast_path::isend_gather_all(transport, sends);
}

bool sends_in_place(Transport& transport, int peer, std::span<const ConstRunRows> rows) {
  const InPlaceTransfers* in_place = transport.fast_paths().in_place;
  return in_place != nullptr && in_place->sends_in_place(peer, rows);
}

bool receives_in_place(Transport& transport, int peer) {
  const InPlaceTransfers* in_place = transport.fast_paths().in_place;
  return in_place != nullptr && in_place->receives_in_place(peer);
}

bool copies_with_sends(Transport& transport) {
  const InPlaceTransfers* in_place = transport.fast_paths().in_place;
  return in_place != nullptr && in_place->copies_with_sends();
}

std::vector<std::unique_ptr<Request>> isend_gather_all_with_copies(Transport& transport,
                                                                   std::span<const GatherSend> sends, int threads,
                                                                   std::span<const LocalCopy> copies) {
  if (InPlaceTransfers* in_place = transport.fast_paths().in_place) {
    return in_place->isend_gather_all_with_copies(sends, threads, copies);
  }
  return without_fast_path::isend_gather_all_with_copies(transport, sends, threads, copies);
}

int processes_on_this_host(Transport& transport) {
  const HostTopology* host = transport.fast_paths().host;
  return host != nullptr ? host->processes_on_this_host() : 1;
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

namespace without_fast_path {

// The runs are copied into (out of) the staging buffer, which is all the
// transport touches: its owner, not the runs', goes with the request.
std::unique_ptr<Request> isend_gather(Transport& transport, int peer, Tag tag, std::span<const ConstByteRun> runs) {
  auto request = std::make_unique<StagedRequest>(StagingCache::for_process().take(total_bytes(runs)),
                                                 std::vector<ByteRun>{});
  std::byte* out = request->staging().data();
  for (const ConstByteRun& run : runs) {
    if (run.size > 0) std::memcpy(out, run.data, run.size);
    out += run.size;
  }
  const Buffer& staging = request->staging();
  request->inner = reshard::isend_owned(transport, peer, tag, staging.bytes(), staging.owner());
  return request;
}

std::unique_ptr<Request> irecv_scatter(Transport& transport, int peer, Tag tag, std::span<const ByteRun> runs) {
  auto request = std::make_unique<StagedRequest>(StagingCache::for_process().take(total_bytes(runs)),
                                                 std::vector<ByteRun>(runs.begin(), runs.end()));
  request->inner = reshard::irecv_owned(transport, peer, tag, request->staging().bytes(), request->staging().owner());
  return request;
}

std::unique_ptr<Request> irecv_scatter_rows(Transport& transport, int peer, Tag tag, std::span<const RunRows> rows,
                                            std::shared_ptr<const void> owner) {
  const std::vector<ByteRun> runs = runs_of(rows);
  return runs.size() == 1 ? reshard::irecv_owned(transport, peer, tag, {runs[0].data, runs[0].size}, std::move(owner))
                          : reshard::irecv_scatter(transport, peer, tag, runs, std::move(owner));
}

std::vector<std::unique_ptr<Request>> isend_gather_all(Transport& transport, std::span<const GatherSend> sends) {
  std::vector<std::unique_ptr<Request>> requests;
  requests.reserve(sends.size());
  for (const GatherSend& send : sends) {
    const std::vector<ConstByteRun> runs = runs_of(send.rows);
    requests.push_back(runs.size() == 1
                           ? reshard::isend_owned(transport, send.peer, send.tag, {runs[0].data, runs[0].size},
                                                  send.owner)
                           : reshard::isend_gather(transport, send.peer, send.tag, runs, send.owner));
  }
  return requests;
}

std::vector<std::unique_ptr<Request>> isend_gather_all_with_copies(Transport& transport,
                                                                   std::span<const GatherSend> sends, int threads,
                                                                   std::span<const LocalCopy> copies) {
  for (const LocalCopy& copy : copies) copy_runs(runs_of(copy.from), runs_of(copy.to));
  std::vector<std::unique_ptr<Request>> requests = reshard::isend_gather_all(transport, sends, threads);
  requests.push_back(std::make_unique<DoneRequest>());
  return requests;
}

}  // namespace without_fast_path

}  // namespace reshard
