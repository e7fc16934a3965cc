// Transport: moves byte buffers between the processes of a job; the core
// every transport implements.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "reshard/layout/byte_run.h"

namespace reshard {

// A pending send or receive. Destroying it before it is done withdraws it: the
// transport never touches the caller's span after that (it keeps the memory
// of an owned request alive instead, or moved the bytes through its own).
class Request {
 public:
  virtual ~Request() = default;
  // Blocks (sleeping, not spinning) until done, for as long as the peer is
  // alive however slow it is; throws Error(kPeerFailed) if the peer announced
  // a failure or left, and Error(kTimeout) naming it if it has been silent
  // for longer than the transport's timeout (dead, or its host unreachable).
  virtual void wait() = 0;
  // Non-blocking: true once done (and from then on).
  virtual bool test() = 0;
};

// What a transport has really moved: the payloads of isend/irecv, counted
// as they complete (collectives' own metadata is not included).
struct TransportCounters {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  // Of bytes_sent, those this process wrote into its receivers' memory
  // itself (the MPI transport between processes that map each other's
  // shared memory, for strided messages); the rest its receivers took.
  uint64_t bytes_written_into_receivers = 0;
};

// Message tags. Each collective operation takes a fresh tag space with
// Transport::begin_operation(); tags inside it cannot collide with any other.
using Tag = uint64_t;

struct FastPaths;

// The core every transport implements. What only some can do faster (sends
// of owned memory, gathers, in-place transfers between the processes of a
// host) is optional, beside it (fast_paths.h).
class Transport {
 public:
  virtual ~Transport() = default;

  // This process's rank and the number of processes, 0 <= rank < size.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Starts a non-blocking send or receive of exactly `data.size()` bytes. The
  // span is used only while the request lives (a transport that could still
  // touch it later moves the bytes through a copy of its own).
  virtual std::unique_ptr<Request> isend(int peer, Tag tag, std::span<const std::byte> data) = 0;
  virtual std::unique_ptr<Request> irecv(int peer, Tag tag, std::span<std::byte> data) = 0;

  // Collective: returns every process's `local` bytes, indexed by rank. The way
  // processes agree on small metadata (shapes, sizes, a failure flag).
  virtual std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> local) = 0;

  // Collective: returns once every process has entered it.
  virtual void barrier() = 0;

  // Collective: whether every process passed the same `value` (all get the
  // same answer). One reduction, not a message between every two processes:
  // how processes check they run the same plans.
  virtual bool all_equal(uint64_t value) = 0;

  // What this process's transport has sent and received so far.
  virtual TransportCounters counters() const = 0;

  // Collective (every process calls it in the same order): the base of a tag
  // range reserved for one operation; tags base..base+kTagsPerOperation-1.
  virtual Tag begin_operation() = 0;
  static constexpr Tag kTagsPerOperation = Tag{1} << 20;

  // Marks this process failed, so that every other process's pending and later
  // waits throw Error(kPeerFailed) naming this rank and `reason` instead of
  // waiting out their timeout. After it this transport is unusable. Called
  // when an operation fails part-way here; never throws.
  virtual void abort(std::string_view reason) noexcept = 0;

  // The liveness bound: how long a peer may stay silent (dead, hung host,
  // lost network) before waits on it fail with Error(kTimeout) naming it. A
  // peer that is alive but slow is waited for however long it takes.
  // Throws Error(kInvalidArgument) unless positive.
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;
  virtual std::chrono::milliseconds timeout() const = 0;

  // The fast paths this transport has beside the core (fast_paths.h):
  // none unless it says so. Callers reach them through transport_calls.h.
  virtual FastPaths fast_paths();

  // Blocking helpers over isend/irecv.
  void send(int peer, Tag tag, std::span<const std::byte> data) { isend(peer, tag, data)->wait(); }
  void recv(int peer, Tag tag, std::span<std::byte> data) { irecv(peer, tag, data)->wait(); }
};

}  // namespace reshard
