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
#include "reshard/execute/buffer.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"
#include "run_groups.h"

namespace reshard::mpi_detail {

// Where one direct message's control traffic travels: two communicators (so
// that headers and replies never match each other) and the message's tag.
struct DirectChannel {
  MPI_Comm headers = MPI_COMM_NULL;  // sender to receiver: where my bytes are
  MPI_Comm replies = MPI_COMM_NULL;  // receiver to sender: read / refused / failed
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
// either, so the receiver always reads.) Where the receiver has mapped the
// sender's shared arena (DirectChannel::arena) and the runs lie in it, the
// sender exposes them however short, and the receiver copies them itself
// with loads and streaming stores: one copy, with no per-run kernel work.
//
// The protocol: the sender posts a header with its pid and runs; the
// receiver, once it has arrived, reads and replies "read", or "refused" when
// the sizes disagree (the receiver's error, as in MPI: the send completes),
// or "failed" with the reason, so that both ends fail instead of one waiting
// out the timeout. The sender's runs need an owner: they are exposed until
// the reply comes, and a request destroyed before it keeps that owner until
// MPI is finalized (the receiver may still be reading). Requests that wait
// for the same kind of control message on the same (peer, tag) take them in
// the order they were started, as MPI delivers them.
class DirectRequest : public PolledRequest {
 public:
  ~DirectRequest() override;
  DirectRequest(const DirectRequest&) = delete;
  DirectRequest& operator=(const DirectRequest&) = delete;

  // The control message a request waits for next.
  enum class Awaiting { kNothing, kHeader, kReply };
  Awaiting awaiting() const { return awaiting_; }
  // Whether `other` goes the same way to the same peer with the same tag.
  bool shares_channel_with(const DirectRequest& other) const {
    return is_send_ == other.is_send_ && peer_ == other.peer_ && tag_ == other.tag_;
  }

 protected:
  // `runs` hold `bytes`; `owner` keeps them alive (a sender's must not be null).
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
  bool exposed_ = false;  // the peer may be reading our runs now

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
  DirectSend(ProgressEngine& engine, int peer, Tag tag, DirectChannel channel, std::vector<RunGroup> runs,
             uint64_t bytes, std::shared_ptr<const void> owner);
  // The same for runs gathered into the first `bytes` of `staging`, which
  // goes back to the process's staging cache once the receiver has read it.
  DirectSend(ProgressEngine& engine, int peer, Tag tag, DirectChannel channel, Buffer staging, uint64_t bytes);
  ~DirectSend() override;
  DirectSend(const DirectSend&) = delete;
  DirectSend& operator=(const DirectSend&) = delete;

 private:
  bool advance() override;

  Buffer staging_;
};

class DirectReceive final : public DirectRequest {
 public:
  // Under the engine's lock. The runs are written only inside advance(), so
  // they need no owner.
  DirectReceive(ProgressEngine& engine, int peer, Tag tag, DirectChannel channel, std::vector<RunGroup> runs,
                uint64_t bytes);
  ~DirectReceive() override;
  DirectReceive(const DirectReceive&) = delete;
  DirectReceive& operator=(const DirectReceive&) = delete;

 private:
  bool advance() override;
  void act_on_header(std::span<const std::byte> header);
};

}  // namespace reshard::mpi_detail
