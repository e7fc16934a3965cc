// MpiTransport: the Transport between the processes of an MPI job.
#pragma once

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "reshard/execute/fast_paths.h"
#include "reshard/execute/transport.h"

namespace reshard {
namespace mpi_detail {
struct PushBatch;
}  // namespace mpi_detail


struct MpiTransportOptions {
  // The largest single MPI message; larger transfers are split. Segments never
  // exceed max_message_bytes, whatever this says.
  size_t segment_bytes = size_t{8} << 20;
  // The most bytes one MPI call may carry: MPI counts are int, so INT_MAX
  // (the most allowed); lower it for an MPI or network with a smaller limit.
  size_t max_message_bytes = static_cast<size_t>(INT_MAX);
  // Bytes posted to MPI and not yet complete, over all pending requests. Each
  // request may always keep one segment posted, so that no request can starve
  // another into a deadlock: the bound is this plus one segment per further
  // pending request.
  size_t max_bytes_in_flight = size_t{128} << 20;
  // The liveness bound: a peer silent (no heartbeat) for this long is taken
  // for dead, and waits on it fail with Error(kTimeout) naming it. A peer
  // that is alive is waited for however slow it is. Zero: the MpiSession's
  // peer_timeout (60 s unless set). Peers beat every 50 ms, so bounds below
  // a few hundred milliseconds risk false alarms on a loaded machine.
  std::chrono::milliseconds timeout{0};
  // Operations that may be in flight at once without their tags colliding.
  size_t concurrent_operations = 16;
  // Gathered sends and scattered receives (strided pieces) as one message of
  // an MPI derived datatype instead of packed into a staging buffer. Off by
  // default: on Open MPI 4.1 over shared memory the two measure about the
  // same (a typed message goes through MPI's copy-in/copy-out pipeline, two
  // copies; a packed one is packed, copied once by the kernel, unpacked);
  // `reshard bench reshard` under mpirun reports both.
  bool derived_datatypes = false;
  // Messages between two processes of one host go as one
  // kernel copy straight between their memories (process_vm_readv/writev),
  // strided on both sides, with no packing and no MPI buffers; pairs that
  // cannot attach to each other's memory (other hosts, a container or Yama
  // that forbids it) use MPI as above. The processes of a pair agree on it at
  // construction: false (or RESHARD_SINGLE_COPY=0 in the environment) in one
  // of them turns it off for every pair that process is in.
  // (RESHARD_SINGLE_COPY=refuse makes this process answer as though the
  // kernel forbade the attach, to test the fallback where it is allowed.)
  bool single_copy = true;
  // Where both processes of a single-copy pair can also map each other's
  // shared memory arena (a memory file they exchange by pidfd_getfd, under
  // the same permission as the kernel copy), buffers of 64 KiB or more that
  // Buffer::allocate makes from then on live in the process's arena, and a
  // peer copies strided messages out of them itself, in user space, one copy
  // at memory speed: the kernel copy's work per run made short runs slow, so
  // its senders gathered them first (two copies). Memory outside the arena
  // (the caller's own, adopted) still goes by the kernel copy. False (or
  // RESHARD_SHARED_MEMORY=0) in one process of a pair turns it off for the
  // pair; RESHARD_SHARED_MEMORY=refuse makes this process's mappings fail,
  // as a kernel without pidfd_getfd would.
  bool shared_memory = true;
  // Between such processes, a receiver whose runs lie in its arena offers
  // them to the sender, which writes a message into them itself where its
  // own runs are the more numerous (a strided source into long target
  // stretches: reading short rows is the slow side of a copy, and the
  // sender reads its shard's rows once, whole, for every receiver and for
  // its own copies). False (or RESHARD_SENDERS_WRITE=0) makes this process's
  // receives never offer, so its peers' messages to it are read by it.
  bool senders_write = true;
};

// How the bytes between this process and one peer travel, and why.
enum class PeerPath {
  kSelf,        // this process: local copies
  kSharedMemory,  // one copy in user space out of the peer's mapped arena (one kernel copy for memory outside it)
  kSingleCopy,  // one kernel copy between the two processes' memories
  kOtherHost,   // through MPI: the peer runs on another host (another kernel or network namespace)
  kOptedOut,    // through MPI: single_copy is off in one of the two processes
  kRefused,     // through MPI: the kernel refused the attach (Yama's ptrace_scope, seccomp, a container)
};

// "self", "shared memory", "single copy", "MPI (other host)", "MPI (single copy off)", "MPI (attach refused)".
std::string_view peer_path_name(PeerPath path);

// Point-to-point transfers are non-blocking MPI_Isend/MPI_Irecv, split into segments, with
// a bound on the bytes in flight (between processes of one host, by default,
// one kernel copy instead: see MpiTransportOptions::single_copy); all_gather is built on the same non-blocking
// calls, barrier and all_equal on MPI_Ibarrier and MPI_Iallreduce. Waits poll
// MPI instead of blocking in it: without pause while any request completes
// something (MPI moves data only while called), sleeping with a backoff
// between looks after a few idle milliseconds. Each
// transport's thread sends every peer a heartbeat, so a wait goes on while its
// peers are alive, and fails instead of hanging when one is not:
// Error(kTimeout) naming a peer silent for longer than the timeout,
// Error(kPeerFailed) naming one that announced its failure (abort) or closed
// its transport.
//
// No memory is freed while MPI may still touch it: a request ended or failed
// part-way leaves its segments in MPI's hands with a share of the memory's
// owner (isend_owned, irecv_owned, and gathers and scatters given an owner;
// plain isend/irecv move the bytes through a copy of the transport's own),
// released when MPI completes them or, at the latest, once MPI is finalized.
// So a caller that catches a failure can go on: with a new transport (peers
// that also caught it construct theirs too).
//
// Traffic runs on communicators duplicated from the parent at construction,
// with MPI_ERRORS_RETURN, so it never mixes with the caller's messages and MPI
// errors become typed errors. All MPI calls are serialised by one lock, so any
// thread may use the transport whatever thread level MPI provides. The
// heartbeat thread needs MPI_THREAD_MULTIPLE (which MpiSession asks for);
// below it, a rank beats only while it waits in the transport, so one busy
// elsewhere for longer than the timeout is taken for dead.
// Requests must not outlive their transport.
class MpiTransport final : public Transport,
                           public OwnedTransfers,
                           public RunTransfers,
                           public InPlaceTransfers,
                           public HostTopology {
 public:
  // Collective over `parent`: every member constructs its transport together.
  // Throws Error(kInvalidArgument) for bad options, Error(kTransport) if MPI
  // is not initialised or fails.
  explicit MpiTransport(MPI_Comm parent = MPI_COMM_WORLD, MpiTransportOptions options = {});
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override;
  int size() const override;
  std::unique_ptr<Request> isend(int peer, Tag tag, std::span<const std::byte> data) override;
  std::unique_ptr<Request> irecv(int peer, Tag tag, std::span<std::byte> data) override;
  std::unique_ptr<Request> isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                       std::shared_ptr<const void> owner) override;
  std::unique_ptr<Request> irecv_owned(int peer, Tag tag, std::span<std::byte> data,
                                       std::shared_ptr<const void> owner) override;
  // To a peer on this host (options().single_copy), one kernel copy straight
  // between the runs. Otherwise, with options().derived_datatypes and an
  // owner, one MPI message of a derived datatype (hindexed over the runs), so
  // MPI moves the bytes between the runs and the wire without a packing pass
  // of ours; otherwise, or when the message exceeds one segment or its runs
  // average under 64 bytes, packed (without_fast_path). Either way it matches a plain isend/irecv of the same
  // bytes. A typed message cut short stays with MPI holding a share of `owner`.
  std::unique_ptr<Request> isend_gather(int peer, Tag tag, std::span<const ConstByteRun> runs,
                                        std::shared_ptr<const void> owner) override;
  // Messages to peers of this host whose runs must be gathered first are
  // gathered together (one walk over the rows they share), then each goes
  // as isend_gather's would; the rest go as isend_gather.
  std::vector<std::unique_ptr<Request>> isend_gather_all(std::span<const GatherSend> sends, int threads) override;
  // In place: a send to a peer that maps our arena from rows that lie in it
  // (read or written where they lie, never gathered first), and a receive
  // from any peer of this host (its runs written straight, by either end).
  bool sends_in_place(int peer, std::span<const ConstRunRows> rows) const override;
  bool receives_in_place(int peer) const override;
  // True where some peer of this host maps our arena: sends to it may write
  // into their receivers, and the copies within this process join that walk.
  bool copies_with_sends() const override;
  std::vector<std::unique_ptr<Request>> isend_gather_all_with_copies(std::span<const GatherSend> sends, int threads,
                                                                     std::span<const LocalCopy> copies) override;
  std::unique_ptr<Request> irecv_scatter(int peer, Tag tag, std::span<const ByteRun> runs,
                                         std::shared_ptr<const void> owner) override;
  // To a peer on this host, the rows as they are (no list of runs); else run by run (without_fast_path).
  std::unique_ptr<Request> irecv_scatter_rows(int peer, Tag tag, std::span<const RunRows> rows,
                                              std::shared_ptr<const void> owner) override;
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> local) override;
  void barrier() override;
  bool all_equal(uint64_t value) override;
  TransportCounters counters() const override;
  Tag begin_operation() override;
  void set_timeout(std::chrono::milliseconds timeout) override;
  std::chrono::milliseconds timeout() const override;
  // The ranks that share this host's kernel (found at construction).
  int processes_on_this_host() const override;
  // All four kinds: owned, run and in-place transfers, and the host count.
  FastPaths fast_paths() override;

  // Marks this process failed: every peer's pending and later waits throw
  // Error(kPeerFailed) naming this rank and `reason`, and so do this
  // transport's own from now on. Sends a notice on a communicator of its own
  // and lingers briefly (about 250 ms) so that peers can report it before a
  // caller tears the job down (MpiSession::abort_job). Never throws.
  void abort(std::string_view reason) noexcept override;

  const MpiTransportOptions& options() const;
  // Whether messages to and from `peer` take the single-copy path
  // (options().single_copy): kSharedMemory or kSingleCopy.
  bool copies_directly_with(int peer) const;
  // The path to `peer` and why (kSelf for this rank). The two processes of a
  // pair always agree. Error(kInvalidArgument) for a rank outside the job.
  PeerPath path_to(int peer) const;
  // The host `rank` runs on, 0..H-1 for a job on H hosts: hosts are numbered
  // in the order of their lowest rank (rank 0's is host 0), and a host is one
  // kernel and one network namespace, as for processes_on_this_host. Every
  // rank gets the same answer. Error(kInvalidArgument) for a rank outside the job.
  int host_of(int rank) const;
  // That host's name and its first IPv4 address other than loopback, e.g.
  // "node7, 10.213.0.3" (the name alone where there is no such address):
  // hosts made of containers or network namespaces share one host name, and
  // the address tells them apart. Errors naming a silent peer say
  // "on host 1 (node7, 10.213.0.3)". Error(kInvalidArgument) as host_of.
  std::string host_name(int rank) const;
  // One line naming the peers each path serves, e.g. "rank 0 of 4: single
  // copy with ranks 1-3". With RESHARD_LOG=debug in the environment, each
  // rank writes it to stderr (prefixed "reshard: ") once it is constructed.
  std::string describe_paths() const;
  // The most bytes that were ever posted to MPI and incomplete at once.
  size_t peak_bytes_in_flight() const;

 private:
  // The sends of one batch, walked together where they write into their receivers.
  std::vector<std::unique_ptr<Request>> start_batch(std::span<const GatherSend> sends,
                                                    std::shared_ptr<mpi_detail::PushBatch> batch);

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace reshard
