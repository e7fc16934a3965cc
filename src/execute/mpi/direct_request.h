// DirectRequest: a message between two processes of one host, copied once by the kernel straight between their runs.
#pragma once

#include <mpi.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "peer_arena.h"
#include "polled_request.h"
#include "progress_engine.h"
#include "push_batch.h"
#include "reshard/execute/buffer.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"
#include "run_groups.h"
#include "streaming_gather.h"

namespace reshard::mpi_detail {

// Where one direct message's control traffic travels: two communicators (so
// that headers and replies never match each other) and the message's tag.
struct DirectChannel {
  MPI_Comm headers = MPI_COMM_NULL;  // sender to receiver: where my bytes are
  MPI_Comm replies = MPI_COMM_NULL;  // receiver to sender: read / refused / failed
  // Between arena peers: receiver to sender, where its runs are; sender to
  // receiver, that it wrote them (or failed to). Channels of their own, so
  // that requests on one tag take each kind of message in order.
  MPI_Comm wheres = MPI_COMM_NULL;
  MPI_Comm writes = MPI_COMM_NULL;
  int mpi_tag = 0;
  // The peer's shared arena mapped here, or null: runs of its that lie in it
  // are copied with loads and stores instead of by the kernel.
  const PeerArena* arena = nullptr;
};

// MPI over shared memory copies a strided message three times (pack, copy,
// unpack: Open MPI single-copies contiguous messages only, and unpacks a
// derived datatype through its own buffers). Between processes of one host
// this request instead tells the receiver where the bytes are, and the
// receiver copies them with process_vm_readv straight into its own runs,
// however strided: one kernel copy.
//
// The kernel pins the peer's pages run by run but walks our own runs
// cheaply, so the sender's runs must be few: a sender whose runs are short
// (a strided box) first gathers them into a contiguous buffer of its own
// with streaming stores, which costs less than the kernel's per-run work.
// (Writing into the receiver with process_vm_writev was measured slower than
// either, so over the kernel copy the receiver always reads.) Where the receiver has mapped the
// sender's shared arena (DirectChannel::arena) and the runs lie in it, the
// sender exposes them however short, and the receiver copies them itself
// with loads and streaming stores: one copy, with no per-run kernel work.
//
// Which side copies: where the sender's runs are many short rows and the
// receiver's fewer, longer ones (a change of the split dimension: 256-byte
// rows 4 KiB apart into 128 KiB stretches), reading the rows is the slow part
// (each row its own miss and page walk); writing them is not (streaming
// stores need no read). So between processes that map each other's arena the
// receiver also tells the sender where its runs are, and when they lie in
// its arena and the sender's runs are the more numerous (sender_writes), the
// sender writes the message into them itself. The sends of one batch that
// write do so together (PushBatch), so the rows of a source shard that go to
// several receivers are read once, whole, as a local copy reads them.
//
// The protocol: the sender posts a header with its pid and runs; between
// arena peers the receiver posts where its runs are ("where", with no runs
// when they may not be written). Where the sender writes, it replies
// "written" once they hold the message; otherwise
// the receiver, once the header has arrived, reads and replies "read", or
// "refused" when the sizes disagree (the receiver's error, as in MPI: the
// send completes), or "failed" with the reason, so that both ends fail
// instead of one waiting out the timeout. Exposed runs need an owner: they
// are exposed until the peer is done with them, and a request destroyed
// before that keeps its owner until MPI is finalized (the peer may still be
// reading or writing them). Requests that wait for the same kind of control
// message on the same (peer, tag) take them in the order they were started,
// as MPI delivers them.

// Whether the sender writes a message into the receiver's runs: the receiver
// offered them (`to` not empty) and the sender's are the more numerous. Both
// ends decide with this from the same two lists.
bool sender_writes(std::span<const RunGroup> from, std::span<const RunGroup> to);

class DirectRequest : public PolledRequest {
 public:
  ~DirectRequest() override;
  DirectRequest(const DirectRequest&) = delete;
  DirectRequest& operator=(const DirectRequest&) = delete;

  // The control message a request waits for next.
  enum class Awaiting { kNothing, kHeader, kReply, kWhere, kWritten };
  Awaiting awaiting() const { return awaiting_; }
  // Which way it goes, to or from which peer, on which tag.
  DirectChannelKey channel_key() const { return DirectChannelKey{is_send_, peer_, tag_}; }

 protected:
  // `runs` hold `bytes`; `owner` keeps them alive while the peer may use them.
  DirectRequest(ProgressEngine& engine, bool is_send, int peer, Tag tag, DirectChannel channel,
                std::vector<RunGroup> runs, uint64_t bytes, std::shared_ptr<const void> owner, Awaiting first);

  // The control message of the awaited kind, if it has arrived and no earlier
  // request on the channel awaits the same kind.
  std::optional<std::vector<std::byte>> take_control(MPI_Comm comm);
  // Posts a control message; kept until MPI has sent it.
  void send_control(MPI_Comm comm, std::vector<std::byte> message);
  // Done: the bytes `moved` (and are counted), or the receiver refused them.
  void finish(bool moved = true);
  // Out of the engine: the first thing each final class's destructor does,
  // so that another thread's progress never advances a request whose
  // derived part is already gone (the base destructor comes too late).
  void leave_engine();
  [[noreturn]] void fail(const std::string& what);
  std::string describe() const override;
  // Lets go of control messages MPI has sent.
  void reap_outgoing();

  const bool is_send_;
  const Tag tag_;
  const DirectChannel channel_;
  const std::vector<RunGroup> runs_;
  const uint64_t bytes_;
  std::shared_ptr<const void> owner_;
  Awaiting awaiting_;
  bool exposed_ = false;  // the peer may be reading or writing our runs now

 private:
  struct Outgoing {
    MPI_Request request = MPI_REQUEST_NULL;
    std::shared_ptr<std::vector<std::byte>> bytes;
  };
  std::vector<Outgoing> outgoing_;
};

class DirectSend final : public DirectRequest {
 public:
  // Under the engine's lock; posts the header. `owner` must not be null.
  // Sends of one `batch` that write into their receivers write together.
  DirectSend(ProgressEngine& engine, int peer, Tag tag, DirectChannel channel, std::vector<RunGroup> runs,
             uint64_t bytes, std::shared_ptr<const void> owner, std::shared_ptr<PushBatch> batch = nullptr);
  // The same for runs gathered into the first `bytes` of `staging`, which
  // goes back to the process's staging cache once the receiver has read it.
  DirectSend(ProgressEngine& engine, int peer, Tag tag, DirectChannel channel, Buffer staging, uint64_t bytes);
  ~DirectSend() override;
  DirectSend(const DirectSend&) = delete;
  DirectSend& operator=(const DirectSend&) = delete;

  // Whether it may yet write into its receiver: its "where" has not come.
  bool may_still_write() const { return awaiting_ == Awaiting::kWhere && !done_; }
  int peer() const { return peer_; }

 private:
  bool advance() override;
  // Takes the receiver's "where" if it has come, and decides who copies.
  // An error is kept for this request's own advance, not thrown.
  void take_where() noexcept;
  void act_on_where(std::span<const std::byte> message);
  // Whether to wait before writing, for members of the batch whose
  // receivers have not yet said where their runs are.
  bool holds_for_siblings();
  // Writes every member of the batch that is to write now, this one among them.
  void write_ready_batch();
  // After its bytes are written: tells the receiver, and is done.
  void written();

  Buffer staging_;
  std::shared_ptr<PushBatch> batch_;
  // The copies into the receiver's runs (mapped here), once it is to write.
  std::vector<GatherJob> writes_;
  bool to_write_ = false;
  std::optional<Error> where_error_;
};

class DirectReceive final : public DirectRequest {
 public:
  // Under the engine's lock. With an `owner` and runs in this process's
  // arena, a peer that maps it is told where they are and may write them;
  // otherwise they are written only inside advance(), and need no owner.
  DirectReceive(ProgressEngine& engine, int peer, Tag tag, DirectChannel channel, std::vector<RunGroup> runs,
                uint64_t bytes, std::shared_ptr<const void> owner, bool offer_runs);
  ~DirectReceive() override;
  DirectReceive(const DirectReceive&) = delete;
  DirectReceive& operator=(const DirectReceive&) = delete;

 private:
  bool advance() override;
  void act_on_header(std::span<const std::byte> header);
  void act_on_written(std::span<const std::byte> message);

  bool offered_ = false;  // the sender was told where our runs are
};

}  // namespace reshard::mpi_detail
