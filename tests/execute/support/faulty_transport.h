// FaultyTransport: another transport, with a fault injected mid-transfer.
#pragma once

#include <functional>
#include <memory>

#include "forwarding_transport.h"
#include "reshard/layout/error.h"

namespace reshard::testing {

// Forwards to `inner`, but on the send after `sends_before_fault` sends
// (owned, gathered or not) calls `fault`, which by default throws Error(kTransport) as a
// failing process would.
class FaultyTransport final : public ForwardingTransport {
 public:
  FaultyTransport(Transport& inner, int sends_before_fault, std::function<void()> fault = {})
      : ForwardingTransport(inner), sends_left_(sends_before_fault), fault_(std::move(fault)) {}

  std::unique_ptr<Request> isend(int peer, Tag tag, std::span<const std::byte> data) override {
    count_send();
    return ForwardingTransport::isend(peer, tag, data);
  }
  std::unique_ptr<Request> isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                       std::shared_ptr<const void> owner) override {
    count_send();
    return ForwardingTransport::isend_owned(peer, tag, data, std::move(owner));
  }
  std::unique_ptr<Request> isend_gather(int peer, Tag tag, std::span<const ConstByteRun> runs,
                                        std::shared_ptr<const void> owner) override {
    count_send();
    return ForwardingTransport::isend_gather(peer, tag, runs, std::move(owner));
  }

 private:
  void count_send() {
    if (sends_left_-- != 0) return;
    if (fault_) fault_();
    throw Error(ErrorCode::kTransport, "injected fault mid-transfer");
  }
  int sends_left_;
  std::function<void()> fault_;
};

}  // namespace reshard::testing
