// The optional fast paths a transport may have beside Transport's core, and
// FastPaths, how it hands them out (Transport::fast_paths()). Callers use the
// free functions of transport_calls.h, which take a fast path where there is
// one and the portable way otherwise.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "reshard/execute/transport.h"
#include "reshard/layout/byte_run.h"

namespace reshard {

// One send of a batch: isend_gather's arguments, its runs given as rows.
struct GatherSend {
  int peer = 0;
  Tag tag = 0;
  std::span<const ConstRunRows> rows;
  std::shared_ptr<const void> owner;
};

// A copy within this process: the bytes of `from`'s rows into `to`'s, in order.
struct LocalCopy {
  std::span<const ConstRunRows> from;
  std::span<const RunRows> to;
};

// Sends and receives of memory that `owner` keeps alive (Buffer::owner()):
// the transport holds a share of it until it is certain never to touch the
// memory again, which may be after the request ends (a failed transfer still
// in MPI's hands), so it can skip the copy a plain isend/irecv may make.
class OwnedTransfers {
 public:
  virtual ~OwnedTransfers() = default;
  virtual std::unique_ptr<Request> isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                               std::shared_ptr<const void> owner) = 0;
  virtual std::unique_ptr<Request> irecv_owned(int peer, Tag tag, std::span<std::byte> data,
                                               std::shared_ptr<const void> owner) = 0;
};

// Messages over many runs (a strided box, say) without packing them into one
// buffer first (MPI: a derived datatype, or a copy straight between the
// processes of a host). Each call's contract is its free function's
// (transport_calls.h); an implementation may fall back on the portable way
// (without_fast_path) for messages it has no faster way for.
class RunTransfers {
 public:
  virtual ~RunTransfers() = default;
  virtual std::unique_ptr<Request> isend_gather(int peer, Tag tag, std::span<const ConstByteRun> runs,
                                                std::shared_ptr<const void> owner) = 0;
  virtual std::unique_ptr<Request> irecv_scatter(int peer, Tag tag, std::span<const ByteRun> runs,
                                                 std::shared_ptr<const void> owner) = 0;
  // Runs given as rows, taken as they are, at no cost per run.
  virtual std::unique_ptr<Request> irecv_scatter_rows(int peer, Tag tag, std::span<const RunRows> rows,
                                                      std::shared_ptr<const void> owner) = 0;
  // A batch whose runs are walked together, so that rows several messages
  // take from (the strips one shard sends to several peers) are read once,
  // not once per message, on up to `threads` threads.
  virtual std::vector<std::unique_ptr<Request>> isend_gather_all(std::span<const GatherSend> sends,
                                                                 int threads) = 0;
};

// Transfers that move the bytes straight between two processes' rows (the
// MPI transport between processes that map each other's shared memory), and
// what a caller may count on because of it.
class InPlaceTransfers {
 public:
  virtual ~InPlaceTransfers() = default;
  // Whether a send to `peer` of `rows` (their memory kept alive by an owner,
  // as isend_gather_all's are), or a receive from `peer` into rows with an
  // owner, holds no memory of the transport's own while in flight.
  virtual bool sends_in_place(int peer, std::span<const ConstRunRows> rows) const = 0;
  virtual bool receives_in_place(int peer) const = 0;
  // Whether the transport would rather make the copies within this process
  // that read a batch's source rows itself, with the batch: one whose sends
  // write into their receivers' memory walks each source row once for all
  // of them, the part that stays here included.
  virtual bool copies_with_sends() const = 0;
  // isend_gather_all, and `copies` made with it (transport_calls.h).
  virtual std::vector<std::unique_ptr<Request>> isend_gather_all_with_copies(std::span<const GatherSend> sends,
                                                                            int threads,
                                                                            std::span<const LocalCopy> copies) = 0;
};

// What the transport knows of the hosts its processes run on.
class HostTopology {
 public:
  virtual ~HostTopology() = default;
  // How many of the job's processes run on this process's host, itself
  // included: what a thread budget divides the host's cores by.
  virtual int processes_on_this_host() const = 0;
};

// The fast paths a transport has; null where it has none of that kind. They
// live as long as the transport (usually they are the transport itself).
struct FastPaths {
  OwnedTransfers* owned = nullptr;
  RunTransfers* runs = nullptr;
  InPlaceTransfers* in_place = nullptr;
  const HostTopology* host = nullptr;
};

}  // namespace reshard
