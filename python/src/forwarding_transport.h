// ForwardingTransport: a transport that hands every call to another one. The
// bindings' wrappers (a closable MPI transport, a TCP one labelled with how
// it was made) derive from it and keep only what they add.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "reshard/execute/fast_paths.h"
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
  FastPaths fast_paths() override { return target().fast_paths(); }

 protected:
  // The transport calls go to; may throw Error where there is none.
  virtual Transport& target() const = 0;
};

}  // namespace reshard::python
