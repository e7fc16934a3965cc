#include "execute/tcp/engine.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "execute/tcp/same_host_probe.h"

namespace reshard::tcp_detail {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

// Bytes moved per system call: large enough to run at the link's speed,
// small enough that the engine's lock is released often.
constexpr size_t kIoSlice = size_t{4} << 20;
// Bytes taken from one peer per turn, so that one fast sender cannot starve
// the others.
constexpr size_t kReadTurn = size_t{16} << 20;
// An abort's reason is text; anything longer is a broken peer.
constexpr uint64_t kMaxAbortReason = 64 * 1024;
// Messages from this size on, to a peer of this host that reads our memory,
// cross as one kernel copy; smaller ones cost less through the socket than
// the round trip that would announce them.
constexpr uint64_t kReadAcrossMinBytes = 64 * 1024;

// How often a peer with nothing to send says it is alive: a few times per
// timeout, so a live peer is never mistaken for a silent one.
milliseconds heartbeat_interval(milliseconds timeout) { return std::clamp(timeout / 5, milliseconds(5), milliseconds(1000)); }

// Set once any engine of this process gave up on a peer (silent past the
// timeout, or its connection broke), heard that a peer did (its abort), or
// told a waiter that a peer failed it (left, or its memory could not be read):
// what waits for every process at exit could wait for a lost one
// (TcpTransport::gave_up_on_a_peer).
std::atomic<bool> g_gave_up_on_a_peer{false};

// An error a waiter is about to be told: one a peer caused marks the job as
// having lost a peer before the waiter hears of it, whatever path found it.
const Error& as_told(const Error& error) {
  if (error.code() == ErrorCode::kPeerFailed) g_gave_up_on_a_peer = true;
  return error;
}

std::string seconds_text(Clock::duration d) {
  return fmt::format("{:.1f} s", std::chrono::duration<double>(d).count());
}

}  // namespace

struct Engine::OutItem {
  FrameHeader header;
  size_t header_sent = 0;
  std::shared_ptr<Op> op;           // a data frame's
  std::vector<std::byte> payload;   // a control frame's
  uint64_t payload_sent = 0;

  // A withdrawn send's `out` points at its own copy (see withdraw).
  std::span<const std::byte> body() const { return op ? op->out : std::span<const std::byte>(payload); }
  bool started() const { return header_sent > 0; }
};

// A message that arrived before its receive was posted (or while its
// receive was posted second): kept here until taken.
struct Engine::Incoming {
  Tag tag = 0;
  std::vector<std::byte> bytes;
  std::optional<ReadableMessage> across;  // to be read out of the sender's memory instead
  bool complete = false;
  std::shared_ptr<Op> waiting;  // a receive posted while it was still arriving
};

struct Engine::Peer {
  int rank = 0;
  std::string label;
  Socket socket;
  std::deque<OutItem> outbox;
  // Reading: a header, then its payload into `target`, `stash`, `control`
  // or nowhere (a withdrawn or refused receive's).
  FrameHeader header;
  size_t header_read = 0;
  uint64_t payload_read = 0;
  std::shared_ptr<Op> target;
  std::shared_ptr<Incoming> stash;
  std::vector<std::byte> control;
  std::map<Tag, std::deque<std::shared_ptr<Op>>> posted;
  std::map<Tag, std::deque<std::shared_ptr<Incoming>>> unexpected;
  pid_t pid = 0;  // where this process reads the peer's memory directly; 0: never
  std::map<uint64_t, std::shared_ptr<Op>> being_read;  // our sends it reads, by id
  uint64_t next_read_id = 0;
  Clock::time_point last_heard = Clock::now();
  Clock::time_point last_sent = Clock::now();
  bool left = false;  // said goodbye: nothing more comes from it
  std::optional<Error> failure;

  bool open() const { return socket.valid(); }
  bool reading_payload() const { return header_read == sizeof(FrameHeader); }
};

Engine::Engine(int rank, std::vector<Socket> connections, std::vector<std::string> labels,
               std::vector<pid_t> readable_pids, milliseconds timeout)
    : rank_(rank), timeout_(timeout), discard_(kIoSlice) {
  for (size_t r = 0; r < connections.size(); ++r) {
    auto peer = std::make_unique<Peer>();
    peer->rank = static_cast<int>(r);
    peer->pid = r < readable_pids.size() ? readable_pids[r] : 0;
    peer->label = labels[r];
    peer->socket = std::move(connections[r]);
    if (peer->open()) {
      make_nonblocking(peer->socket);
      disable_nagle(peer->socket);
    }
    peers_.push_back(std::move(peer));
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw Error(ErrorCode::kTransport, "eventfd: " + system_error_text(errno));
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  std::unique_lock lock(mutex_);
  for (auto& peer : peers_) {
    if (!peer->open() || peer->failure || job_failure_) continue;
    OutItem goodbye;
    goodbye.header.kind = static_cast<uint32_t>(FrameKind::kGoodbye);
    peer->outbox.push_back(std::move(goodbye));
  }
  wake();
  // Long enough for the goodbyes of a job that ends normally; a peer that
  // has stopped taking bytes is not waited for.
  changed_.wait_for(lock, std::min(timeout_, milliseconds(2000)), [&] {
    return std::all_of(peers_.begin(), peers_.end(), [](const auto& p) { return !p->open() || p->outbox.empty(); });
  });
  stopping_ = true;
  wake();
  lock.unlock();
  thread_.join();
  for (auto& peer : peers_) {
    if (!peer->open()) continue;
    ::shutdown(peer->socket.fd(), SHUT_WR);
    while (::recv(peer->socket.fd(), discard_.data(), discard_.size(), MSG_DONTWAIT) > 0) {
    }
  }
  ::close(wake_fd_);
}

void Engine::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(wake_fd_, &one, sizeof one);
}

std::optional<Error> Engine::failure_for(const Peer& peer) const {
  if (job_failure_) return job_failure_;
  return peer.failure;
}

void Engine::complete(Op& op, std::optional<Error> error) {
  if (op.done) return;
  op.done = true;
  op.error = std::move(error);
  if (op.error || !op.counted) return;
  const uint64_t bytes = op.is_send ? op.out.size() : (op.any_size ? op.owned.size() : op.in.size());
  if (op.is_send) {
    counters_.bytes_sent += bytes;
    ++counters_.messages_sent;
  } else {
    counters_.bytes_received += bytes;
    ++counters_.messages_received;
  }
}

// --- posting ---------------------------------------------------------------

std::shared_ptr<Op> Engine::send(int peer, Tag tag, std::span<const std::byte> data, std::shared_ptr<const void> keep,
                                 bool counted) {
  auto op = std::make_shared<Op>();
  op->counted = counted;
  op->is_send = true;
  op->peer = peer;
  op->tag = tag;
  op->out = data;
  op->keep = std::move(keep);
  std::lock_guard lock(mutex_);
  Peer& to = *peers_.at(static_cast<size_t>(peer));
  if (auto failure = failure_for(to)) {
    complete(*op, failure);
    return op;
  }
  if (peer == rank_) {
    arrive_here(to, op);
    complete(*op, std::nullopt);
    changed_.notify_all();
    return op;
  }
  OutItem item;
  item.header.tag = tag;
  if (to.pid != 0 && op->keep && data.size() >= kReadAcrossMinBytes) {
    // The caller keeps the memory alive (`keep`) until the peer says it has
    // read it, whatever happens to the request meanwhile.
    const ReadableMessage readable{reinterpret_cast<uintptr_t>(data.data()), data.size(), to.next_read_id++};
    to.being_read[readable.id] = op;
    item.header.kind = static_cast<uint32_t>(FrameKind::kReadable);
    item.header.bytes = sizeof readable;
    const auto* raw = reinterpret_cast<const std::byte*>(&readable);
    item.payload.assign(raw, raw + sizeof readable);
  } else {
    item.header.kind = static_cast<uint32_t>(FrameKind::kData);
    item.header.bytes = data.size();
    item.op = op;
  }
  to.outbox.push_back(std::move(item));
  // An idle connection takes the frame at once, from this thread; the rest
  // the progress thread writes as the connection drains.
  if (to.outbox.size() == 1) write_to(to);
  if (!to.outbox.empty()) wake();
  return op;
}

// A message to this rank itself: matched as one from a peer would be.
void Engine::arrive_here(Peer& self, const std::shared_ptr<Op>& op) {
  auto message = std::make_shared<Incoming>();
  message->tag = op->tag;
  message->bytes.assign(op->out.begin(), op->out.end());
  message->complete = true;
  match_arrival(self, message);
}

std::shared_ptr<Op> Engine::receive(int peer, Tag tag, std::span<std::byte> data, std::shared_ptr<const void> keep) {
  auto op = std::make_shared<Op>();
  op->peer = peer;
  op->tag = tag;
  op->in = data;
  op->keep = std::move(keep);
  post(op);
  return op;
}

std::shared_ptr<Op> Engine::receive_any_size(int peer, Tag tag) {
  auto op = std::make_shared<Op>();
  op->peer = peer;
  op->tag = tag;
  op->any_size = true;
  op->counted = false;
  post(op);
  return op;
}

void Engine::post(const std::shared_ptr<Op>& op) {
  std::lock_guard lock(mutex_);
  Peer& from = *peers_.at(static_cast<size_t>(op->peer));
  auto& stashed = from.unexpected[op->tag];
  if (!stashed.empty()) {
    const auto message = stashed.front();
    stashed.pop_front();
    if (message->complete) {
      deliver(from, *message, *op);
      wake();  // a read across may have queued its notice
    } else {
      message->waiting = op;
    }
    return;
  }
  if (auto failure = failure_for(from)) {
    complete(*op, failure);
    return;
  }
  from.posted[op->tag].push_back(op);
}

// Copies a whole stashed message into its receive.
void Engine::deliver(Peer& from, Incoming& message, Op& op) {
  if (message.across) {
    read_across(from, message, op);
    return;
  }
  if (op.any_size) {
    op.owned = std::move(message.bytes);
  } else if (message.bytes.size() != op.in.size()) {
    complete(op, Error(ErrorCode::kTransport,
                       fmt::format("{} sent {} bytes with tag {}, the receive expected {}", from.label,
                                   message.bytes.size(), message.tag, op.in.size())));
    return;
  } else if (!message.bytes.empty()) {
    std::memcpy(op.in.data(), message.bytes.data(), message.bytes.size());
  }
  complete(op, std::nullopt);
}

// --- waiting ---------------------------------------------------------------

void Engine::wait(Op& op) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (op.done) {
      if (op.error) throw as_told(*op.error);
      return;
    }
    const Peer& peer = *peers_[static_cast<size_t>(op.peer)];
    if (auto failure = failure_for(peer)) throw as_told(*failure);
    // A message to this rank itself waits on nobody but this process.
    const auto silent = op.peer == rank_ ? Clock::duration::zero() : Clock::now() - peer.last_heard;
    if (silent > timeout_) {
      g_gave_up_on_a_peer = true;
      throw Error(ErrorCode::kTimeout,
                  fmt::format("{} has been silent for {} (the timeout is {}): it died, hangs or cannot be reached",
                              peer.label, seconds_text(silent), seconds_text(timeout_)));
    }
    changed_.wait_for(lock, std::min(timeout_ - std::chrono::duration_cast<milliseconds>(silent) + 1ms, 200ms));
  }
}

bool Engine::test(Op& op) {
  std::lock_guard lock(mutex_);
  if (!op.done) {
    if (auto failure = failure_for(*peers_[static_cast<size_t>(op.peer)])) throw as_told(*failure);
    return false;
  }
  if (op.error) throw as_told(*op.error);
  return true;
}

void Engine::withdraw(const std::shared_ptr<Op>& op) noexcept {
  std::lock_guard lock(mutex_);
  if (op->done || op->withdrawn) return;
  op->withdrawn = true;
  Peer& peer = *peers_[static_cast<size_t>(op->peer)];
  if (op->is_send) {
    // One the peer may be reading stays as it is: its memory is kept alive.
    for (const auto& [id, reading] : peer.being_read) {
      if (reading == op) return;
    }
    auto& box = peer.outbox;
    const auto it = std::find_if(box.begin(), box.end(), [&](const OutItem& item) { return item.op == op; });
    if (it == box.end()) return;
    if (!it->started()) {
      box.erase(it);
    } else if (!op->keep) {
      // Half on the wire: the frame must be finished, from a copy.
      op->owned.assign(op->out.begin(), op->out.end());
      op->out = op->owned;
    }
    return;
  }
  if (peer.target == op) {
    peer.target.reset();  // the rest of its bytes go to discard_
    return;
  }
  auto& queue = peer.posted[op->tag];
  queue.erase(std::remove(queue.begin(), queue.end(), op), queue.end());
  for (auto& [tag, messages] : peer.unexpected) {
    for (auto& message : messages) {
      if (message->waiting == op) message->waiting.reset();
    }
  }
  if (peer.stash && peer.stash->waiting == op) peer.stash->waiting.reset();
}

// --- failure -----------------------------------------------------------------

void Engine::fail_pending_of(Peer& peer, const Error& error) {
  for (auto& [tag, queue] : peer.posted) {
    for (auto& op : queue) complete(*op, error);
  }
  peer.posted.clear();
  if (peer.target) complete(*peer.target, error);
  if (peer.stash && peer.stash->waiting) complete(*peer.stash->waiting, error);
  for (auto& [tag, messages] : peer.unexpected) {
    for (auto& message : messages) {
      if (message->waiting && !message->complete) complete(*message->waiting, error);
    }
  }
  for (OutItem& item : peer.outbox) {
    if (item.op) complete(*item.op, error);
  }
  for (auto& [id, op] : peer.being_read) complete(*op, error);
  peer.being_read.clear();
}

void Engine::fail_everything(const Error& error) {
  if (!job_failure_) job_failure_ = error;
  for (auto& peer : peers_) fail_pending_of(*peer, *job_failure_);
  changed_.notify_all();
}

// The connection broke without a goodbye: the process died, or its host or
// the network between us went away.
void Engine::peer_lost(Peer& peer, const std::string& why) {
  peer.socket.close();
  if (peer.left || peer.failure) return;
  g_gave_up_on_a_peer = true;
  const std::string who = peer.rank == 0 ? "the coordinator, " + peer.label : peer.label;
  peer.failure = Error(ErrorCode::kPeerFailed, fmt::format("{} left the job: its connection {}", who, why));
  fail_pending_of(peer, *peer.failure);
  peer.outbox.clear();
  changed_.notify_all();
}

// A goodbye: the peer closed its transport; what it sent before has arrived.
void Engine::peer_left(Peer& peer) {
  peer.left = true;
  peer.failure = Error(ErrorCode::kPeerFailed, fmt::format("{} closed its transport and left the job", peer.label));
  fail_pending_of(peer, *peer.failure);
  changed_.notify_all();
}

void Engine::abort(std::string_view reason) noexcept {
  try {
    std::unique_lock lock(mutex_);
    if (job_failure_) return;
    const std::string text(reason);
    for (auto& peer : peers_) {
      if (!peer->open() || peer->failure) continue;
      // Only a frame half on the wire is finished first; the rest never go.
      while (peer->outbox.size() > (peer->outbox.empty() || !peer->outbox.front().started() ? 0 : 1)) {
        peer->outbox.pop_back();
      }
      OutItem item;
      item.header.kind = static_cast<uint32_t>(FrameKind::kAbort);
      item.header.bytes = std::min<uint64_t>(text.size(), kMaxAbortReason);
      item.payload.assign(reinterpret_cast<const std::byte*>(text.data()),
                          reinterpret_cast<const std::byte*>(text.data()) + item.header.bytes);
      peer->outbox.push_back(std::move(item));
    }
    fail_everything(Error(ErrorCode::kPeerFailed, fmt::format("rank {} (this process) failed: {}", rank_, text)));
    wake();
    changed_.wait_for(lock, milliseconds(1000), [&] {
      return std::all_of(peers_.begin(), peers_.end(), [](const auto& p) { return !p->open() || p->outbox.empty(); });
    });
  } catch (...) {
    // abort() never throws: the peers then learn of the failure from the timeout.
  }
}

void Engine::set_timeout(milliseconds timeout) {
  if (timeout <= 0ms) throw Error(ErrorCode::kInvalidArgument, "the transport's timeout must be positive");
  std::lock_guard lock(mutex_);
  timeout_ = timeout;
  wake();  // heartbeats follow the new bound at once
}

milliseconds Engine::timeout() const {
  std::lock_guard lock(mutex_);
  return timeout_;
}

TransportCounters Engine::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

// --- the progress thread -----------------------------------------------------

void Engine::run() {
  std::vector<pollfd> fds;
  std::vector<Peer*> owners;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    owners.assign(1, nullptr);
    for (auto& peer : peers_) {
      if (!peer->open()) continue;
      const short events = static_cast<short>(POLLIN | (peer->outbox.empty() ? 0 : POLLOUT));
      fds.push_back(pollfd{peer->socket.fd(), events, 0});
      owners.push_back(peer.get());
    }
    const auto interval = heartbeat_interval(timeout_);
    lock.unlock();
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(interval.count()));
    lock.lock();
    if (ready < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) {
      uint64_t count = 0;
      [[maybe_unused]] const ssize_t got = ::read(wake_fd_, &count, sizeof count);
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      Peer& peer = *owners[i];
      if (!peer.open()) continue;
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) read_from(peer);
      if (peer.open() && (fds[i].revents & POLLOUT) != 0) write_to(peer);
    }
    send_heartbeats(Clock::now());
    changed_.notify_all();
  }
}

void Engine::send_heartbeats(Clock::time_point now) {
  const auto interval = heartbeat_interval(timeout_);
  for (auto& peer : peers_) {
    if (!peer->open() || !peer->outbox.empty() || now - peer->last_sent < interval) continue;
    OutItem beat;
    beat.header.kind = static_cast<uint32_t>(FrameKind::kHeartbeat);
    peer->outbox.push_back(std::move(beat));
    write_to(*peer);
  }
}

void Engine::write_to(Peer& peer) {
  while (peer.open() && !peer.outbox.empty()) {
    OutItem& item = peer.outbox.front();
    const std::span<const std::byte> body = item.body();
    iovec pieces[2];
    int count = 0;
    if (item.header_sent < sizeof(FrameHeader)) {
      pieces[count++] = {reinterpret_cast<std::byte*>(&item.header) + item.header_sent,
                         sizeof(FrameHeader) - item.header_sent};
    }
    const uint64_t left = body.size() - item.payload_sent;
    if (left > 0) {
      pieces[count++] = {const_cast<std::byte*>(body.data() + item.payload_sent),
                         static_cast<size_t>(std::min<uint64_t>(left, kIoSlice))};
    }
    ssize_t sent = 0;
    if (count > 0) {
      msghdr message{};
      message.msg_iov = pieces;
      message.msg_iovlen = static_cast<size_t>(count);
      sent = ::sendmsg(peer.socket.fd(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        peer_lost(peer, fmt::format("broke ({})", system_error_text(errno)));
        return;
      }
    }
    peer.last_sent = Clock::now();
    auto written = static_cast<uint64_t>(sent);
    const size_t header_part = std::min<uint64_t>(written, sizeof(FrameHeader) - item.header_sent);
    item.header_sent += header_part;
    item.payload_sent += written - header_part;
    if (item.header_sent < sizeof(FrameHeader) || item.payload_sent < body.size()) continue;
    if (item.op) complete(*item.op, std::nullopt);
    peer.outbox.pop_front();
    changed_.notify_all();
  }
}

void Engine::read_from(Peer& peer) {
  size_t taken = 0;
  while (peer.open() && taken < kReadTurn) {
    const size_t before_header = peer.header_read;
    const uint64_t before_payload = peer.payload_read;
    if (!read_some(peer)) return;
    taken += (peer.header_read - before_header) + static_cast<size_t>(peer.payload_read - before_payload);
  }
}

// One system call's worth; false when the socket has nothing more for now
// (or failed).
bool Engine::read_some(Peer& peer) {
  std::byte* into = nullptr;
  size_t want = 0;
  if (!peer.reading_payload()) {
    into = reinterpret_cast<std::byte*>(&peer.header) + peer.header_read;
    want = sizeof(FrameHeader) - peer.header_read;
  } else {
    const uint64_t left = peer.header.bytes - peer.payload_read;
    want = static_cast<size_t>(std::min<uint64_t>(left, kIoSlice));
    if (peer.target && !peer.target->withdrawn) {
      into = (peer.target->any_size ? peer.target->owned.data() : peer.target->in.data()) + peer.payload_read;
    } else if (peer.stash) {
      into = peer.stash->bytes.data() + peer.payload_read;
    } else if (peer.header.kind != static_cast<uint32_t>(FrameKind::kData)) {
      into = peer.control.data() + peer.payload_read;
    } else {
      into = discard_.data();
      want = std::min(want, discard_.size());
    }
  }
  const ssize_t got = ::recv(peer.socket.fd(), into, want, MSG_DONTWAIT);
  if (got == 0) {
    peer_lost(peer, "closed");
    return false;
  }
  if (got < 0) {
    if (errno == EAGAIN || errno == EINTR) return false;
    peer_lost(peer, fmt::format("broke ({})", system_error_text(errno)));
    return false;
  }
  peer.last_heard = Clock::now();
  if (!peer.reading_payload()) {
    peer.header_read += static_cast<size_t>(got);
    if (peer.reading_payload()) begin_frame(peer);
  } else {
    peer.payload_read += static_cast<uint64_t>(got);
    if (peer.payload_read == peer.header.bytes) end_frame(peer);
  }
  return peer.open();
}

void Engine::begin_frame(Peer& peer) {
  peer.payload_read = 0;
  const FrameHeader& header = peer.header;
  switch (static_cast<FrameKind>(header.kind)) {
    case FrameKind::kHeartbeat:
    case FrameKind::kGoodbye:
      if (header.bytes != 0) break;
      end_frame(peer);
      return;
    case FrameKind::kAbort:
      if (header.bytes > kMaxAbortReason) break;
      peer.control.assign(static_cast<size_t>(header.bytes), std::byte{0});
      if (header.bytes == 0) end_frame(peer);
      return;
    case FrameKind::kReadable:
      if (header.bytes != sizeof(ReadableMessage) || peer.pid == 0) break;
      peer.control.assign(sizeof(ReadableMessage), std::byte{0});
      return;
    case FrameKind::kReadDone:
      if (header.bytes != sizeof(uint64_t)) break;
      peer.control.assign(sizeof(uint64_t), std::byte{0});
      return;
    case FrameKind::kData: {
      auto& waiting = peer.posted[header.tag];
      auto& stashed = peer.unexpected[header.tag];
      if (!waiting.empty() && stashed.empty()) {
        peer.target = waiting.front();
        waiting.pop_front();
        if (peer.target->any_size) {
          peer.target->owned.resize(static_cast<size_t>(header.bytes));
        } else if (peer.target->in.size() != header.bytes) {
          complete(*peer.target,
                   Error(ErrorCode::kTransport, fmt::format("{} sent {} bytes with tag {}, the receive expected {}",
                                                            peer.label, header.bytes, header.tag,
                                                            peer.target->in.size())));
          peer.target.reset();  // its bytes are read and dropped
        }
      } else {
        peer.stash = std::make_shared<Incoming>();
        peer.stash->tag = header.tag;
        peer.stash->bytes.resize(static_cast<size_t>(header.bytes));
        stashed.push_back(peer.stash);
      }
      if (header.bytes == 0) end_frame(peer);
      return;
    }
  }
  peer_lost(peer, fmt::format("carried a malformed frame (kind {}, {} bytes)", header.kind, header.bytes));
}

void Engine::end_frame(Peer& peer) {
  const auto kind = static_cast<FrameKind>(peer.header.kind);
  peer.header_read = 0;
  peer.payload_read = 0;
  if (kind == FrameKind::kGoodbye) {
    peer_left(peer);
  } else if (kind == FrameKind::kAbort) {
    const std::string reason(reinterpret_cast<const char*>(peer.control.data()), peer.control.size());
    g_gave_up_on_a_peer = true;
    fail_everything(Error(ErrorCode::kPeerFailed, fmt::format("{} failed: {}", peer.label, reason)));
  } else if (kind == FrameKind::kReadable) {
    auto message = std::make_shared<Incoming>();
    message->tag = peer.header.tag;
    message->across.emplace();
    std::memcpy(&*message->across, peer.control.data(), sizeof(ReadableMessage));
    message->complete = true;
    match_arrival(peer, message);
    changed_.notify_all();
  } else if (kind == FrameKind::kReadDone) {
    uint64_t id = 0;
    std::memcpy(&id, peer.control.data(), sizeof id);
    if (auto found = peer.being_read.extract(id)) complete(*found.mapped(), std::nullopt);
    changed_.notify_all();
  } else if (kind == FrameKind::kData) {
    if (peer.target) {
      complete(*peer.target, std::nullopt);
      peer.target.reset();
    } else if (peer.stash) {
      peer.stash->complete = true;
      if (auto receive = std::move(peer.stash->waiting)) deliver(peer, *peer.stash, *receive);
      peer.stash.reset();
    }
    changed_.notify_all();
  }
}

// A whole message that arrived: to the first receive waiting for it, unless
// earlier ones of its tag wait to be taken, else kept for a later receive.
void Engine::match_arrival(Peer& from, const std::shared_ptr<Incoming>& message) {
  auto& waiting = from.posted[message->tag];
  auto& stashed = from.unexpected[message->tag];
  if (!waiting.empty() && stashed.empty()) {
    const auto receive = waiting.front();
    waiting.pop_front();
    deliver(from, *message, *receive);
    return;
  }
  stashed.push_back(message);
}

// Reads a message out of its sender's memory into `op`, then tells the
// sender, whose send completes then (and whatever this side made of it).
void Engine::read_across(Peer& from, const Incoming& message, Op& op) {
  const ReadableMessage& readable = *message.across;
  if (!op.any_size && op.in.size() != readable.bytes) {
    complete(op, Error(ErrorCode::kTransport, fmt::format("{} sent {} bytes with tag {}, the receive expected {}",
                                                          from.label, readable.bytes, message.tag, op.in.size())));
  } else {
    if (op.any_size) op.owned.resize(static_cast<size_t>(readable.bytes));
    const std::span<std::byte> into = op.any_size ? std::span<std::byte>(op.owned) : op.in;
    if (read_peer_memory(from.pid, readable.address, into)) {
      complete(op, std::nullopt);
    } else {
      complete(op, Error(ErrorCode::kPeerFailed, fmt::format("reading {}'s memory failed (pid {}): {}", from.label,
                                                             from.pid, system_error_text(errno))));
    }
  }
  send_control(from, FrameKind::kReadDone, std::as_bytes(std::span(&readable.id, 1)));
}

void Engine::send_control(Peer& to, FrameKind kind, std::span<const std::byte> payload) {
  if (!to.open()) return;
  OutItem item;
  item.header.kind = static_cast<uint32_t>(kind);
  item.header.bytes = payload.size();
  item.payload.assign(payload.begin(), payload.end());
  to.outbox.push_back(std::move(item));
  if (to.outbox.size() == 1) write_to(to);
}

bool gave_up_on_a_peer() { return g_gave_up_on_a_peer; }

}  // namespace reshard::tcp_detail
