// ForwardingTransport: another transport, every call handed on; tests
// override the calls they watch or change.
#pragma once

#include <memory>

#include "reshard/execute/transport.h"

namespace reshard::testing {

// Forwards each of Transport's calls to `inner`, except the batch calls
// (isend_gather_all, irecv_scatter_rows and the like), which keep
// Transport's defaults and so come back through this transport's own
// isend_gather and irecv_scatter.
class ForwardingTransport : public Transport {
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
  std::unique_ptr<Request> isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                       std::shared_ptr<const void> owner) override {
    return inner_.isend_owned(peer, tag, data, std::move(owner));
  }
  std::unique_ptr<Request> irecv_owned(int peer, Tag tag, std::span<std::byte> data,
                                       std::shared_ptr<const void> owner) override {
    return inner_.irecv_owned(peer, tag, data, std::move(owner));
  }
  std::unique_ptr<Request> isend_gather(int peer, Tag tag, std::span<const ConstByteRun> runs,
                                        std::shared_ptr<const void> owner = nullptr) override {
    return inner_.isend_gather(peer, tag, runs, std::move(owner));
  }
  std::unique_ptr<Request> irecv_scatter(int peer, Tag tag, std::span<const ByteRun> runs,
                                         std::shared_ptr<const void> owner = nullptr) override {
    return inner_.irecv_scatter(peer, tag, runs, std::move(owner));
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
  int processes_on_this_host() const override { return inner_.processes_on_this_host(); }

 protected:
  Transport& inner() { return inner_; }

 private:
  Transport& inner_;
};

}  // namespace reshard::testing
