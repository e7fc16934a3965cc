// Transport: moves byte buffers between the processes of a job.
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

  // The same for memory that `owner` keeps alive (Buffer::owner()): the
  // transport holds a share of it until it is certain never to touch the
  // memory again, which may be after the request ends (a failed transfer
  // still in MPI's hands), so it can skip the copy. Null: as above.
  virtual std::unique_ptr<Request> isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                               std::shared_ptr<const void> owner);
  virtual std::unique_ptr<Request> irecv_owned(int peer, Tag tag, std::span<std::byte> data,
                                               std::shared_ptr<const void> owner);

  // Like isend/irecv of the runs' bytes concatenated (a strided box, say),
  // without packing them into one buffer first where the transport can (MPI:
  // a derived datatype). The runs' memory must stay alive until wait()
  // returns; the list itself is copied. The message must not share its
  // (peer, tag) with another pending one. By default the runs are packed into
  // (unpacked from) a staging buffer around isend_owned (irecv_owned), which
  // keeps the staging buffer alive past a failure. `owner` keeps the runs'
  // memory alive as for isend_owned; a transport handing the runs themselves
  // to MPI does so only with an owner (null: it packs).
  virtual std::unique_ptr<Request> isend_gather(int peer, Tag tag, std::span<const ConstByteRun> runs,
                                                std::shared_ptr<const void> owner = nullptr);
  virtual std::unique_ptr<Request> irecv_scatter(int peer, Tag tag, std::span<const ByteRun> runs,
                                                 std::shared_ptr<const void> owner = nullptr);

  // irecv_scatter into runs given as rows. By default the rows are listed
  // run by run for irecv_scatter; a transport that describes memory as
  // strided rows itself (the MPI transport between processes of a host)
  // takes them as they are, at no cost per run.
  virtual std::unique_ptr<Request> irecv_scatter_rows(int peer, Tag tag, std::span<const RunRows> rows,
                                                      std::shared_ptr<const void> owner = nullptr);

  // One send of a batch: isend_gather's arguments, its runs given as rows.
  struct GatherSend {
    int peer = 0;
    Tag tag = 0;
    std::span<const ConstRunRows> rows;
    std::shared_ptr<const void> owner;
  };
  // Starts every send of the batch, each as isend_gather would (one run as
  // isend_owned; by default the rows are listed run by run), and returns
  // their requests in the batch's order. A
  // transport that gathers runs into buffers of its own walks the batch's
  // runs together, so that rows several messages take from (the strips one
  // shard sends to several peers) are read once, not once per message, on
  // up to `threads` threads.
  virtual std::vector<std::unique_ptr<Request>> isend_gather_all(std::span<const GatherSend> sends, int threads);

  // Whether a send to `peer` of `rows` (their memory kept alive by an owner,
  // as isend_gather_all's are), or a receive from `peer` into rows with an
  // owner, holds no memory of the transport's own while in flight: the bytes
  // go straight between the two processes' rows. A bound on bytes in flight,
  // which is there to bound such memory, need not count it. False unless the
  // transport knows better.
  virtual bool sends_in_place(int /*peer*/, std::span<const ConstRunRows> /*rows*/) const { return false; }
  virtual bool receives_in_place(int /*peer*/) const { return false; }

  // A copy within this process: the bytes of `from`'s rows into `to`'s, in order.
  struct LocalCopy {
    std::span<const ConstRunRows> from;
    std::span<const RunRows> to;
  };
  // Whether the transport would rather make the copies within this process
  // that read a batch's source rows itself, with the batch (below): one
  // whose sends write into their receivers' memory walks each source row
  // once for all of them, the part that stays here included.
  virtual bool copies_with_sends() const { return false; }
  // isend_gather_all, and `copies` within this process from rows that the
  // sends read: the sends' requests, then one more, done once the copies are
  // made (their rows, and the lists, must stay alive until then). By default
  // the copies are made here, first.
  virtual std::vector<std::unique_ptr<Request>> isend_gather_all_with_copies(std::span<const GatherSend> sends,
                                                                            int threads,
                                                                            std::span<const LocalCopy> copies);

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

  // How many of the job's processes run on this process's host, itself
  // included: what a thread budget divides the host's cores by. 1 unless the
  // transport knows better.
  virtual int processes_on_this_host() const { return 1; }

  // Blocking helpers over isend/irecv.
  void send(int peer, Tag tag, std::span<const std::byte> data) { isend(peer, tag, data)->wait(); }
  void recv(int peer, Tag tag, std::span<std::byte> data) { irecv(peer, tag, data)->wait(); }
};

}  // namespace reshard
