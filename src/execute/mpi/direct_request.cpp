#include "direct_request.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "mpi_error.h"
#include "orphans.h"
#include "run_copy.h"
#include "../staging_cache.h"
#include "same_host_copy.h"

namespace reshard::mpi_detail {
namespace {

// How long a send that may write waits for the other members of its batch
// whose receivers have not yet said where their runs are: one walk for all
// of them reads each source row once, whole, where a walk per group that is
// ready reads each row again, in part (the slow side of a strided copy).
// Past this, it writes with those that are ready: a receiver may be busy
// elsewhere for long.
constexpr std::chrono::microseconds kHoldForSiblings{2000};

// Every control message: this head, then `groups` RunGroups or a reason's text.
// kRefused: the receiver expected another size; as with MPI, that is the
// receiver's error, and the send completes (having moved nothing). kWhere:
// the receiver's runs, for the sender to write (none: it may not).
// kWritten: the sender wrote them.
enum class Kind : uint64_t { kHeader = 1, kRead = 2, kRefused = 3, kFailed = 4, kWhere = 5, kWritten = 6 };
struct WireHead {
  Kind kind = Kind::kFailed;
  int64_t pid = 0;
  uint64_t bytes = 0;
  uint64_t groups = 0;
};

std::vector<std::byte> encode(Kind kind, uint64_t bytes, std::span<const RunGroup> groups, std::string_view text = {}) {
  const WireHead head{kind, static_cast<int64_t>(::getpid()), bytes, groups.size()};
  std::vector<std::byte> out(sizeof(head) + groups.size_bytes() + text.size());
  std::memcpy(out.data(), &head, sizeof(head));
  if (!groups.empty()) std::memcpy(out.data() + sizeof(head), groups.data(), groups.size_bytes());
  if (!text.empty()) std::memcpy(out.data() + sizeof(head) + groups.size_bytes(), text.data(), text.size());
  return out;
}

struct Decoded {
  WireHead head;
  std::vector<RunGroup> groups;
  std::string text;
};

// Throws Error(kTransport) naming `what` for a message of the wrong shape.
Decoded decode(std::span<const std::byte> message, const std::string& what) {
  Decoded d;
  if (message.size() < sizeof(WireHead)) {
    throw Error(ErrorCode::kTransport, fmt::format("{}: a control message of {} bytes is too short", what, message.size()));
  }
  std::memcpy(&d.head, message.data(), sizeof(WireHead));
  const size_t rest = message.size() - sizeof(WireHead);
  if (d.head.groups > rest / sizeof(RunGroup)) {
    throw Error(ErrorCode::kTransport, fmt::format("{}: a control message announces {} runs groups in {} bytes", what,
                                                   d.head.groups, rest));
  }
  d.groups.resize(static_cast<size_t>(d.head.groups));
  if (!d.groups.empty()) std::memcpy(d.groups.data(), message.data() + sizeof(WireHead), d.groups.size() * sizeof(RunGroup));
  const size_t text_at = sizeof(WireHead) + d.groups.size() * sizeof(RunGroup);
  d.text.assign(reinterpret_cast<const char*>(message.data() + text_at), message.size() - text_at);
  return d;
}

}  // namespace

bool sender_writes(std::span<const RunGroup> from, std::span<const RunGroup> to) {
  return !to.empty() && count_runs(from) > count_runs(to);
}

DirectRequest::DirectRequest(ProgressEngine& engine, bool is_send, int peer, Tag tag, DirectChannel channel,
                             std::vector<RunGroup> runs, uint64_t bytes, std::shared_ptr<const void> owner,
                             Awaiting first)
    : PolledRequest(engine, peer),
      is_send_(is_send),
      tag_(tag),
      channel_(channel),
      runs_(std::move(runs)),
      bytes_(bytes),
      owner_(std::move(owner)),
      awaiting_(first) {
  engine_.add(this);
}

DirectRequest::~DirectRequest() {
  auto guard = engine_.lock();
  // Already out (leave_engine), unless a derived constructor threw.
  engine_.remove(this);
  // The receiver may still be reading our runs: their memory stays.
  if (exposed_ && !done_) {
    try {
      Orphans::instance().keep_until_finalized(owner_);
    } catch (...) {
      // Out of memory on a failure path: nothing left to keep it with.
    }
  }
  for (Outgoing& out : outgoing_) {
    int finished = 0;
    if (MPI_Test(&out.request, &finished, MPI_STATUS_IGNORE) == MPI_SUCCESS && finished == 0) {
      Orphans::instance().adopt(out.request, std::move(out.bytes));
    }
  }
}

std::optional<std::vector<std::byte>> DirectRequest::take_control(MPI_Comm comm) {
  if (!engine_.first_awaiting(this)) return std::nullopt;
  int arrived = 0;
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  check_mpi(MPI_Improbe(peer_, channel_.mpi_tag, comm, &arrived, &message, &status), describe());
  if (arrived == 0) return std::nullopt;
  int count = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "reading a control message's size");
  std::vector<std::byte> bytes(static_cast<size_t>(std::max(count, 0)));
  check_mpi(MPI_Mrecv(bytes.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE), describe());
  return bytes;
}

void DirectRequest::send_control(MPI_Comm comm, std::vector<std::byte> message) {
  auto bytes = std::make_shared<std::vector<std::byte>>(std::move(message));
  Outgoing out{MPI_REQUEST_NULL, bytes};
  check_mpi(MPI_Isend(bytes->data(), static_cast<int>(bytes->size()), MPI_BYTE, peer_, channel_.mpi_tag, comm,
                      &out.request),
            describe());
  outgoing_.push_back(std::move(out));
}

void DirectRequest::reap_outgoing() {
  std::erase_if(outgoing_, [](Outgoing& out) {
    int finished = 0;
    return MPI_Test(&out.request, &finished, MPI_STATUS_IGNORE) != MPI_SUCCESS || finished != 0;
  });
}

void DirectRequest::leave_engine() {
  auto guard = engine_.lock();
  engine_.remove(this);
}

void DirectRequest::finish(bool moved) {
  done_ = true;
  exposed_ = false;
  awaiting_ = Awaiting::kNothing;
  if (!moved) return;
  engine_.note_completion();
  engine_.count_completed(is_send_, bytes_);
}

void DirectRequest::fail(const std::string& what) {
  awaiting_ = Awaiting::kNothing;
  throw Error(ErrorCode::kTransport, fmt::format("rank {}: {}: {}", engine_.rank(), describe(), what));
}

std::string DirectRequest::describe() const {
  return is_send_ ? fmt::format("sending {} bytes to rank {} on this host (tag {})", bytes_, peer_, tag_)
                  : fmt::format("receiving {} bytes from rank {} on this host (tag {})", bytes_, peer_, tag_);
}

DirectSend::DirectSend(ProgressEngine& engine, int peer, Tag tag, DirectChannel channel, std::vector<RunGroup> runs,
                       uint64_t bytes, std::shared_ptr<const void> owner, std::shared_ptr<PushBatch> batch)
    : DirectRequest(engine, true, peer, tag, channel, std::move(runs), bytes, std::move(owner),
                    channel.arena != nullptr ? Awaiting::kWhere : Awaiting::kReply),
      batch_(std::move(batch)) {
  send_control(channel_.headers, encode(Kind::kHeader, bytes_, runs_));
  exposed_ = true;
  if (batch_) batch_->members.push_back(this);
}

DirectSend::DirectSend(ProgressEngine& engine, int peer, Tag tag, DirectChannel channel, Buffer staging,
                       uint64_t bytes)
    : DirectSend(engine, peer, tag, channel,
                 group_runs(std::vector<ConstByteRun>{ConstByteRun{staging.data(), static_cast<size_t>(bytes)}}),
                 bytes, staging.owner()) {
  staging_ = std::move(staging);
}

DirectSend::~DirectSend() {
  // Out of the batch first: a sibling's progress must not reach this one once
  // it is out of the engine.
  if (batch_) {
    auto guard = engine_.lock();
    std::erase(batch_->members, this);
  }
  leave_engine();
  if (!done_ || staging_.size() == 0) return;
  // Read and done with: back to the cache, holding no other share of it.
  owner_.reset();
  execute_detail::StagingCache::for_process().give_back(std::move(staging_));
}

void DirectSend::take_where() noexcept {
  try {
    std::optional<std::vector<std::byte>> where = take_control(channel_.wheres);
    if (where) act_on_where(*where);
  } catch (const Error& e) {
    where_error_ = e;
    awaiting_ = Awaiting::kNothing;
  }
}

void DirectSend::act_on_where(std::span<const std::byte> message) {
  awaiting_ = Awaiting::kReply;
  const Decoded d = decode(message, describe());
  if (d.head.kind != Kind::kWhere) {
    fail(fmt::format("rank {} sent control message {} where it should say where its runs are", peer_,
                     static_cast<uint64_t>(d.head.kind)));
  }
  // Sizes that disagree: the receiver refuses, and this send then completes.
  if (!sender_writes(runs_, d.groups) || count_bytes(d.groups) != bytes_) return;
  std::optional<std::vector<RunGroup>> mapped = channel_.arena->to_local(d.groups);
  if (!mapped) {
    const std::string why = fmt::format("rank {} asked to be written outside its shared memory", peer_);
    send_control(channel_.writes, encode(Kind::kFailed, bytes_, {}, why));
    fail(why);
  }
  writes_ = row_copies_between_runs(*mapped, runs_, bytes_);
  to_write_ = true;
}

bool DirectSend::holds_for_siblings() {
  if (!batch_) return false;
  // Flags only: each sibling takes its own "where" when the engine advances
  // it (this round or the next), not here (a probe per pair of members).
  const bool waiting = std::any_of(batch_->members.begin(), batch_->members.end(), [this](const DirectSend* other) {
    return other != this && !other->where_error_ && other->may_still_write();
  });
  if (!waiting) return false;
  const auto now = std::chrono::steady_clock::now();
  if (!batch_->first_ready) batch_->first_ready = now;
  return now - *batch_->first_ready < kHoldForSiblings;
}

void DirectSend::write_ready_batch() {
  std::vector<DirectSend*> writers{this};
  if (batch_) {
    for (DirectSend* other : batch_->members) {
      if (other == this || other->done_ || other->where_error_) continue;
      if (other->awaiting_ == Awaiting::kWhere) other->take_where();
      if (other->to_write_) writers.push_back(other);
    }
  }
  std::vector<GatherJob> jobs;
  for (const DirectSend* writer : writers) jobs.insert(jobs.end(), writer->writes_.begin(), writer->writes_.end());
  if (batch_) {
    jobs.insert(jobs.end(), batch_->copies.begin(), batch_->copies.end());
    batch_->copies.clear();
  }
  // Ends with a store fence: the bytes are in place before "written" goes.
  gather_streaming(jobs, batch_ ? batch_->threads : 1);
  for (DirectSend* writer : writers) writer->written();
}

void DirectSend::written() {
  to_write_ = false;
  writes_.clear();
  send_control(channel_.writes, encode(Kind::kWritten, bytes_, {}));
  // The receiver reads nothing of ours now; its "read" never comes.
  finish();
  engine_.count_written(bytes_);
}

bool DirectSend::advance() {
  reap_outgoing();
  if (awaiting_ == Awaiting::kWhere) take_where();
  if (where_error_) throw *where_error_;  // kept by the request from now on
  if (to_write_) {
    if (holds_for_siblings()) return false;
    write_ready_batch();
    return true;
  }
  if (awaiting_ == Awaiting::kWhere) return false;
  std::optional<std::vector<std::byte>> reply = take_control(channel_.replies);
  if (!reply) return false;
  const Decoded d = decode(*reply, describe());
  switch (d.head.kind) {
    case Kind::kRead:
      finish();
      return true;
    case Kind::kRefused:
      finish(/*moved=*/false);
      return true;
    case Kind::kFailed:
      exposed_ = false;
      fail(fmt::format("rank {} failed to take them: {}", peer_, d.text));
    default:
      fail(fmt::format("rank {} replied with an unknown control message ({})", peer_,
                       static_cast<uint64_t>(d.head.kind)));
  }
}

DirectReceive::DirectReceive(ProgressEngine& engine, int peer, Tag tag, DirectChannel channel,
                             std::vector<RunGroup> runs, uint64_t bytes, std::shared_ptr<const void> owner,
                             bool offer_runs)
    : DirectRequest(engine, false, peer, tag, channel, std::move(runs), bytes, std::move(owner), Awaiting::kHeader),
      offered_(offer_runs && owner_ != nullptr && channel_.arena != nullptr) {
  // Between arena peers the sender waits for where our runs are, offered or not.
  if (channel_.arena == nullptr) return;
  send_control(channel_.wheres, encode(Kind::kWhere, bytes_, offered_ ? std::span(runs_) : std::span<const RunGroup>()));
  exposed_ = offered_;
}

DirectReceive::~DirectReceive() { leave_engine(); }

bool DirectReceive::advance() {
  reap_outgoing();
  if (awaiting_ == Awaiting::kHeader) {
    std::optional<std::vector<std::byte>> header = take_control(channel_.headers);
    if (!header) return false;
    act_on_header(*header);
    if (done_) return true;
  }
  std::optional<std::vector<std::byte>> written = take_control(channel_.writes);
  if (!written) return false;
  act_on_written(*written);
  return true;
}

void DirectReceive::act_on_written(std::span<const std::byte> message) {
  const Decoded d = decode(message, describe());
  if (d.head.kind == Kind::kFailed) {
    exposed_ = false;
    fail(fmt::format("rank {} failed to write them: {}", peer_, d.text));
  }
  if (d.head.kind != Kind::kWritten) {
    fail(fmt::format("rank {} sent control message {} where it should say it wrote them", peer_,
                     static_cast<uint64_t>(d.head.kind)));
  }
  finish();
}

void DirectReceive::act_on_header(std::span<const std::byte> header) {
  const Decoded d = decode(header, describe());
  if (d.head.kind != Kind::kHeader) fail(fmt::format("rank {} sent an unknown control message", peer_));
  if (d.head.bytes != bytes_ || count_bytes(d.groups) != bytes_) {
    send_control(channel_.replies, encode(Kind::kRefused, bytes_, {}));
    exposed_ = false;  // the sender writes no runs whose size disagrees
    fail(fmt::format("rank {} sent {} bytes where {} were expected (do both sides agree on the message size?)", peer_,
                     d.head.bytes, bytes_));
  }
  if (offered_ && sender_writes(d.groups, runs_)) {
    awaiting_ = Awaiting::kWritten;
    return;
  }
  exposed_ = false;
  try {
    const std::optional<std::vector<RunGroup>> mapped =
        channel_.arena != nullptr ? channel_.arena->to_local(d.groups) : std::nullopt;
    if (mapped) {
      copy_between_runs(runs_, *mapped, bytes_);
    } else {
      read_from_peer(static_cast<pid_t>(d.head.pid), peer_, d.groups, runs_, bytes_);
    }
  } catch (const Error& e) {
    send_control(channel_.replies, encode(Kind::kFailed, bytes_, {}, e.what()));
    fail(e.what());
  }
  send_control(channel_.replies, encode(Kind::kRead, bytes_, {}));
  finish();
}

}  // namespace reshard::mpi_detail
