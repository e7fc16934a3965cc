// The calls beyond Transport's core: each takes the transport's fast path
// (fast_paths.h) where it has one, and the portable way, over the core's
// isend and irecv, otherwise. The executor and every other caller use these.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "reshard/execute/fast_paths.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/byte_run.h"

namespace reshard {

// Like isend/irecv, for memory that `owner` keeps alive (Buffer::owner()):
// the transport holds a share of it until it is certain never to touch the
// memory again, which may be after the request ends, so it can skip the
// copy. Null: as isend/irecv.
std::unique_ptr<Request> isend_owned(Transport& transport, int peer, Tag tag, std::span<const std::byte> data,
                                     std::shared_ptr<const void> owner);
std::unique_ptr<Request> irecv_owned(Transport& transport, int peer, Tag tag, std::span<std::byte> data,
                                     std::shared_ptr<const void> owner);

// Like isend/irecv of the runs' bytes concatenated (a strided box, say),
// without packing them into one buffer first where the transport can. The
// runs' memory must stay alive until wait() returns; the list itself is
// copied. The message must not share its (peer, tag) with another pending
// one. Without a fast path the runs are packed into (unpacked from) a staging
// buffer around isend_owned (irecv_owned), which keeps the staging buffer
// alive past a failure. `owner` keeps the runs' memory alive as for
// isend_owned; a transport handing the runs themselves to MPI does so only
// with an owner (null: it packs).
std::unique_ptr<Request> isend_gather(Transport& transport, int peer, Tag tag, std::span<const ConstByteRun> runs,
                                      std::shared_ptr<const void> owner = nullptr);
std::unique_ptr<Request> irecv_scatter(Transport& transport, int peer, Tag tag, std::span<const ByteRun> runs,
                                       std::shared_ptr<const void> owner = nullptr);

// irecv_scatter into runs given as rows. Without a fast path the rows are
// listed run by run for irecv_scatter (one run: irecv_owned).
std::unique_ptr<Request> irecv_scatter_rows(Transport& transport, int peer, Tag tag, std::span<const RunRows> rows,
                                            std::shared_ptr<const void> owner = nullptr);

// Starts every send of the batch, each as isend_gather would (one run as
// isend_owned), and returns their requests in the batch's order. A transport
// that gathers runs into buffers of its own walks the batch's runs together
// on up to `threads` threads.
std::vector<std::unique_ptr<Request>> isend_gather_all(Transport& transport, std::span<const GatherSend> sends,
                                                       int threads);

// Whether a send to `peer` of `rows` (their memory kept alive by an owner, as
// isend_gather_all's are), or a receive from `peer` into rows with an owner,
// holds no memory of the transport's own while in flight: the bytes go
// straight between the two processes' rows. A bound on bytes in flight, which
// is there to bound such memory, need not count it. False without a fast path.
bool sends_in_place(Transport& transport, int peer, std::span<const ConstRunRows> rows);
bool receives_in_place(Transport& transport, int peer);

// Whether the transport would rather make the copies within this process
// that read a batch's source rows itself, with the batch (below). False
// without a fast path.
bool copies_with_sends(Transport& transport);

// isend_gather_all, and `copies` within this process from rows that the sends
// read: the sends' requests, then one more, done once the copies are made
// (their rows, and the lists, must stay alive until then). Without a fast
// path the copies are made here, first.
std::vector<std::unique_ptr<Request>> isend_gather_all_with_copies(Transport& transport,
                                                                   std::span<const GatherSend> sends, int threads,
                                                                   std::span<const LocalCopy> copies);

// How many of the job's processes run on this process's host, itself
// included: what a thread budget divides the host's cores by. 1 unless the
// transport knows better.
int processes_on_this_host(Transport& transport);

// The portable ways, for a transport's fast path to fall back on for the
// messages it has no faster way for. Each goes through `transport`'s own
// calls above (its isend_owned, say), never its fast path for the same call.
namespace without_fast_path {

std::unique_ptr<Request> isend_gather(Transport& transport, int peer, Tag tag, std::span<const ConstByteRun> runs);
std::unique_ptr<Request> irecv_scatter(Transport& transport, int peer, Tag tag, std::span<const ByteRun> runs);
std::unique_ptr<Request> irecv_scatter_rows(Transport& transport, int peer, Tag tag, std::span<const RunRows> rows,
                                            std::shared_ptr<const void> owner);
std::vector<std::unique_ptr<Request>> isend_gather_all(Transport& transport, std::span<const GatherSend> sends);
std::vector<std::unique_ptr<Request>> isend_gather_all_with_copies(Transport& transport,
                                                                   std::span<const GatherSend> sends, int threads,
                                                                   std::span<const LocalCopy> copies);

}  // namespace without_fast_path

}  // namespace reshard
