// ForwardingTransport: a transport that hands every call to another one. The
// bindings' wrappers (a closable MPI transport, a TCP one labelled with how
// it was made) derive from it and keep only what they add.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "reshard/execute/transport.h"

namespace reshard::python {

class ForwardingTransport : public Transport {
 public:
  int rank() const override { return target().rank(); }
  int size() const override { return target().size(); }
  std::unique_ptr<Request> isend(int peer, Tag tag, std::span<const std::byte> data) override {
    return target().isend(peer, tag, data);
  }
  std::unique_ptr<Request> irecv(int peer, Tag tag, std::span<std::byte> data) override {
    return target().irecv(peer, tag, data);
  }
  std::unique_ptr<Request> isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                       std::shared_ptr<const void> owner) override {
    return target().isend_owned(peer, tag, data, std::move(owner));
  }
  std::unique_ptr<Request> irecv_owned(int peer, Tag tag, std::span<std::byte> data,
                                       std::shared_ptr<const void> owner) override {
    return target().irecv_owned(peer, tag, data, std::move(owner));
  }
  std::unique_ptr<Request> isend_gather(int peer, Tag tag, std::span<const ConstByteRun> runs,
                                        std::shared_ptr<const void> owner) override {
    return target().isend_gather(peer, tag, runs, std::move(owner));
  }
  std::unique_ptr<Request> irecv_scatter(int peer, Tag tag, std::span<const ByteRun> runs,
                                         std::shared_ptr<const void> owner) override {
    return target().irecv_scatter(peer, tag, runs, std::move(owner));
  }
  std::unique_ptr<Request> irecv_scatter_rows(int peer, Tag tag, std::span<const RunRows> rows,
                                              std::shared_ptr<const void> owner) override {
    return target().irecv_scatter_rows(peer, tag, rows, std::move(owner));
  }
  std::vector<std::unique_ptr<Request>> isend_gather_all(std::span<const GatherSend> sends, int threads) override {
    return target().isend_gather_all(sends, threads);
  }
  bool copies_with_sends() const override { return target().copies_with_sends(); }
  std::vector<std::unique_ptr<Request>> isend_gather_all_with_copies(std::span<const GatherSend> sends, int threads,
                                                                     std::span<const LocalCopy> copies) override {
    return target().isend_gather_all_with_copies(sends, threads, copies);
  }
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> local) override {
    return target().all_gather(local);
  }
  void barrier() override { target().barrier(); }
  bool all_equal(uint64_t value) override { return target().all_equal(value); }
  TransportCounters counters() const override { return target().counters(); }
  Tag begin_operation() override { return target().begin_operation(); }
  void abort(std::string_view reason) noexcept override {
    try {
      target().abort(reason);
    } catch (...) {  // no target (a closed transport): nothing to abort
    }
  }
  void set_timeout(std::chrono::milliseconds timeout) override { target().set_timeout(timeout); }
  std::chrono::milliseconds timeout() const override { return target().timeout(); }
  int processes_on_this_host() const override { return target().processes_on_this_host(); }

 protected:
  // The transport calls go to; may throw Error where there is none.
  virtual Transport& target() const = 0;
};

}  // namespace reshard::python
