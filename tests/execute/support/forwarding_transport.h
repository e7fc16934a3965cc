// ForwardingTransport: another transport, every call handed on; tests
// override the calls they watch or change.
#pragma once

#include <memory>

#include "reshard/execute/fast_paths.h"
#include "reshard/execute/transport.h"
#include "reshard/execute/transport_calls.h"

namespace reshard::testing {

// Forwards each of Transport's calls to `inner`, and its owned sends and
// receives, gathers and scatters as the fast paths of this transport itself,
// so that tests can override them. The batch calls (isend_gather_all,
// irecv_scatter_rows) take the portable way, and so come back through this
// transport's own isend_gather and irecv_scatter; nothing is in place, and
// the host count is `inner`'s.
class ForwardingTransport : public Transport, public OwnedTransfers, public RunTransfers {
 public:
  explicit ForwardingTransport(Transport& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::unique_ptr<Request> isend(int peer, Tag tag, std::span<const std::byte> data) override {
    return inner_.isend(peer, tag, data);
  }
  std::unique_ptr<Request> irecv(int peer, Tag tag, std::span<std::byte> data) override {
    return inner_.irecv(peer, tag, data);
  }
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> local) override {
    return inner_.all_gather(local);
  }
  void barrier() override { inner_.barrier(); }
  bool all_equal(uint64_t value) override { return inner_.all_equal(value); }
  TransportCounters counters() const override { return inner_.counters(); }
  Tag begin_operation() override { return inner_.begin_operation(); }
  void abort(std::string_view reason) noexcept override { inner_.abort(reason); }
  void set_timeout(std::chrono::milliseconds timeout) override { inner_.set_timeout(timeout); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }
  FastPaths fast_paths() override { return {.owned = this, .runs = this, .host = inner_.fast_paths().host}; }

  std::unique_ptr<Request> isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                       std::shared_ptr<const void> owner) override {
    return reshard::isend_owned(inner_, peer, tag, data, std::move(owner));
  }
  std::unique_ptr<Request> irecv_owned(int peer, Tag tag, std::span<std::byte> data,
                                       std::shared_ptr<const void> owner) override {
    return reshard::irecv_owned(inner_, peer, tag, data, std::move(owner));
  }
  std::unique_ptr<Request> isend_gather(int peer, Tag tag, std::span<const ConstByteRun> runs,
                                        std::shared_ptr<const void> owner) override {
    return reshard::isend_gather(inner_, peer, tag, runs, std::move(owner));
  }
  std::unique_ptr<Request> irecv_scatter(int peer, Tag tag, std::span<const ByteRun> runs,
                                         std::shared_ptr<const void> owner) override {
    return reshard::irecv_scatter(inner_, peer, tag, runs, std::move(owner));
  }
  std::unique_ptr<Request> irecv_scatter_rows(int peer, Tag tag, std::span<const RunRows> rows,
                                              std::shared_ptr<const void> owner) override {
    return without_fast_path::irecv_scatter_rows(*this, peer, tag, rows, std::move(owner));
  }
  std::vector<std::unique_ptr<Request>> isend_gather_all(std::span<const GatherSend> sends,
                                                         int /*threads*/) override {
    return without_fast_path::isend_gather_all(*this, sends);
  }

 protected:
  Transport& inner() { return inner_; }

 private:
  Transport& inner_;
};

}  // namespace reshard::testing
