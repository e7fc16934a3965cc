#include "reshard/execute/mpi/mpi_transport.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "all_gather.h"
#include "segmented_request.h"
#include "communicator.h"
#include "direct_request.h"
#include "given_up_peers.h"
#include "mpi_error.h"
#include "nonblocking_collective.h"
#include "orphans.h"
#include "peer_paths.h"
#include "progress_engine.h"
#include "push_batch.h"
#include "run_copy.h"
#include "reshard/execute/buffer.h"
#include "reshard/execute/mpi/mpi_session.h"
#include "reshard/execute/transport_calls.h"
#include "../run_bytes.h"
#include "../shared_arena.h"
#include "../staging_cache.h"
#include "run_groups.h"
#include "same_host_peers.h"
#include "streaming_gather.h"
#include "tag_map.h"
#include "typed_request.h"
#include "reshard/layout/error.h"

namespace reshard {

using mpi_detail::check_mpi;

namespace {

int mpi_tag_ub() {
  void* value = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found), "reading MPI_TAG_UB");
  return found != 0 ? *static_cast<int*>(value) : 32767;
}

// The shortest average run worth a derived datatype.
constexpr size_t kMinTypedRunBytes = 64;
// The shortest average run a single-copy sender lets its peer read in place.
constexpr size_t kMinExposedRunBytes = 4096;

// The options with the session's timeout filled in where they leave it to it.
MpiTransportOptions validated(MpiTransportOptions options) {
  if (options.timeout.count() == 0) options.timeout = MpiSession::peer_timeout();
  if (options.segment_bytes == 0 || options.max_bytes_in_flight == 0 || options.concurrent_operations == 0 ||
      options.timeout.count() < 0 || options.max_message_bytes == 0 ||
      options.max_message_bytes > static_cast<size_t>(INT_MAX)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("MPI transport options: segment_bytes ({}), max_bytes_in_flight ({}), "
                            "concurrent_operations ({}) and timeout ({} ms) must all be positive, and "
                            "max_message_bytes ({}) between 1 and INT_MAX",
                            options.segment_bytes, options.max_bytes_in_flight, options.concurrent_operations,
                            options.timeout.count(), options.max_message_bytes));
  }
  return options;
}

void require_mpi_initialized() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized == 0 || finalized != 0) {
    throw Error(ErrorCode::kTransport, "MPI is not initialised (create an MpiSession first)");
  }
}

// Takes every message that arrived on `comm` and was never received (a failed
// operation's, or beats and notices not read) off the wire, so that its
// senders' requests can complete and MPI holds no stray message for it.
void drain_unreceived(MPI_Comm comm) noexcept {
  try {
    while (true) {
      int arrived = 0;
      MPI_Message message = MPI_MESSAGE_NULL;
      MPI_Status status;
      if (MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &arrived, &message, &status) != MPI_SUCCESS ||
          arrived == 0) {
        return;
      }
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      auto sink = std::make_shared<std::vector<std::byte>>(static_cast<size_t>(std::max(count, 0)));
      MPI_Request request = MPI_REQUEST_NULL;
      if (MPI_Imrecv(sink->data(), count, MPI_BYTE, &message, &request) == MPI_SUCCESS) {
        mpi_detail::Orphans::instance().adopt(request, std::move(sink));
      }
    }
  } catch (...) {
    // Out of memory on the way out: the rest stays with MPI.
  }
}

}  // namespace

// The communicators (failure notices, heartbeats, collectives, and the tag
// ring's data communicators), the tag map, the progress engine and the
// heartbeat thread. Members are destroyed in reverse: the thread stops
// first, and the engine goes before the communicators it uses.
struct MpiTransport::State {
  MpiTransportOptions options;
  mpi_detail::Communicator control;
  mpi_detail::Communicator heartbeat_comm;
  mpi_detail::Communicator collective;
  std::vector<mpi_detail::Communicator> data;
  // The single-copy path's control messages, one of each per data communicator.
  std::vector<mpi_detail::Communicator> direct_headers;
  std::vector<mpi_detail::Communicator> direct_replies;
  // Between arena peers: where a receiver's runs are, and that a sender wrote them.
  std::vector<mpi_detail::Communicator> direct_wheres;
  std::vector<mpi_detail::Communicator> direct_writes;
  std::vector<PeerPath> peer_paths;
  // Entry j: rank j's shared arena, mapped here, where the pair's path is kSharedMemory.
  std::vector<std::shared_ptr<const mpi_detail::PeerArena>> peer_arenas;
  std::vector<int> host_of;
  std::vector<std::string> host_names;
  int processes_on_host = 1;
  // Whether our receives offer their runs to senders that map our arena.
  bool senders_write = true;
  int rank = 0;
  int size = 1;
  int tag_ub = 32767;
  mpi_detail::TagMap tags;
  mpi_detail::ProgressEngine engine;
  std::atomic<uint64_t> next_operation{0};
  uint64_t next_collective = 0;
  std::mutex beat_mutex;
  std::condition_variable_any beat_wakeup;
  std::jthread beating;

  State(MPI_Comm parent, MpiTransportOptions opts)
      : options(opts), control(parent), heartbeat_comm(parent), collective(parent), rank(control.rank()),
        size(control.size()), tag_ub(mpi_tag_ub()), tags(tag_ub, options.concurrent_operations),
        engine(rank, size, control.get(), heartbeat_comm.get(), options.max_bytes_in_flight, options.timeout) {
    data.reserve(tags.num_communicators());
    for (size_t i = 0; i < tags.num_communicators(); ++i) data.emplace_back(parent);
    mpi_detail::HostPeers host =
        mpi_detail::find_same_host_peers(collective.get(), options.single_copy, options.shared_memory);
    peer_paths = std::move(host.paths);
    peer_arenas = std::move(host.arenas);
    // Peers read our large buffers in place only once they live in the arena.
    if (std::find(peer_paths.begin(), peer_paths.end(), PeerPath::kSharedMemory) != peer_paths.end()) {
      execute_detail::SharedArena::serve_allocations();
    }
    processes_on_host = host.processes_on_host;
    const char* senders_write_env = std::getenv("RESHARD_SENDERS_WRITE");
    senders_write = options.senders_write && (senders_write_env == nullptr || std::string_view(senders_write_env) != "0");
    host_of = std::move(host.host_of);
    host_names = std::move(host.host_names);
    engine.set_host_labels(host_labels());
    if (any_rank_copies_directly()) {
      for (auto* comms : {&direct_headers, &direct_replies, &direct_wheres, &direct_writes}) {
        comms->reserve(tags.num_communicators());
        for (size_t i = 0; i < tags.num_communicators(); ++i) comms->emplace_back(parent);
      }
    }
    // The thread makes MPI calls beside the caller's: only MPI_THREAD_MULTIPLE
    // allows that. Without it, ranks beat only while they wait in this
    // transport, so a rank busy elsewhere for longer than the timeout looks dead.
    int level = MPI_THREAD_SINGLE;
    check_mpi(MPI_Query_thread(&level), "querying MPI's thread level");
    if (size > 1 && level == MPI_THREAD_MULTIPLE) {
      beating = std::jthread([this](std::stop_token stop) { beat_until(stop); });
    }
  }

  ~State() {
    if (beating.joinable()) {
      beating.request_stop();
      beating.join();
    }
    engine.say_goodbye();
    auto guard = engine.lock();
    for (const auto* comms : {&data, &direct_headers, &direct_replies, &direct_wheres, &direct_writes}) {
      for (const auto& comm : *comms) drain_unreceived(comm.get());
    }
    for (MPI_Comm comm : {collective.get(), control.get(), heartbeat_comm.get()}) drain_unreceived(comm);
  }

  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Whether some pair of the job copies directly. Duplicating a communicator
  // is collective, so every rank must decide alike whether to make the
  // single-copy path's: a rank with no such peer (alone on its host, or
  // refused) still takes part when others need them.
  bool any_rank_copies_directly() {
    int mine = std::any_of(peer_paths.begin(), peer_paths.end(), is_direct) ? 1 : 0;
    int any = 0;
    check_mpi(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_LOR, collective.get()),
              "agreeing whether any processes copy directly");
    return any != 0;
  }

  // "host 1 (myhost, 10.213.0.3)" for each rank.
  std::vector<std::string> host_labels() const {
    std::vector<std::string> labels;
    labels.reserve(host_of.size());
    for (size_t j = 0; j < host_of.size(); ++j) {
      labels.push_back(fmt::format("host {} ({})", host_of[j], host_names[j]));
    }
    return labels;
  }

  // A thread of its own, so that this rank beats while it is busy elsewhere.
  void beat_until(const std::stop_token& stop) {
    std::unique_lock guard(beat_mutex);
    while (!stop.stop_requested()) {
      guard.unlock();
      engine.heartbeat();
      guard.lock();
      beat_wakeup.wait_for(guard, stop, mpi_detail::Heartbeats::kBeatPeriod, [] { return false; });
    }
  }

  size_t segment_bytes() const { return std::min(options.segment_bytes, options.max_message_bytes); }

  void check_peer(int peer) const {
    if (peer < 0 || peer >= size) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("rank {}: peer rank {} is outside this job of {} processes", rank, peer, size));
    }
  }

  std::unique_ptr<Request> start(mpi_detail::Direction direction, int peer, Tag tag, std::byte* data_ptr,
                                 size_t bytes, std::shared_ptr<const void> owner) {
    check_peer(peer);
    const mpi_detail::MpiTagSlot slot = tags.map(tag);
    mpi_detail::SegmentedMessage message{direction, peer,  tag,   data[slot.communicator].get(), slot.tag, data_ptr,
                                       bytes,     std::move(owner)};
    auto guard = engine.lock();
    engine.throw_if_aborted();
    return std::make_unique<mpi_detail::SegmentedRequest>(engine, message, segment_bytes());
  }

  // Whether messages to and from `peer` take the single-copy path. Both
  // ends must decide alike from what both know, so every size goes this way
  // (a size threshold would send a message one side sized wrongly down two
  // paths that never meet, a hang instead of an error). Never this rank.
  bool goes_direct(int peer) const {
    return peer >= 0 && peer < size && is_direct(peer_paths[static_cast<size_t>(peer)]);
  }
  static bool is_direct(PeerPath path) { return path == PeerPath::kSingleCopy || path == PeerPath::kSharedMemory; }

  // `peer`'s arena mapped here, or null.
  const mpi_detail::PeerArena* arena_of(int peer) const {
    return static_cast<size_t>(peer) < peer_arenas.size() ? peer_arenas[static_cast<size_t>(peer)].get() : nullptr;
  }

  mpi_detail::DirectChannel direct_channel(int peer, Tag tag) const {
    const mpi_detail::MpiTagSlot slot = tags.map(tag);
    return {direct_headers[slot.communicator].get(), direct_replies[slot.communicator].get(),
            direct_wheres[slot.communicator].get(), direct_writes[slot.communicator].get(), slot.tag,
            arena_of(peer)};
  }

  // A single-copy send over `runs`. The sender exposes its runs to the
  // receiver only when they are owned, and either in our arena with a peer
  // that maps it (it copies them itself, however short) or long; otherwise it
  // gathers them into a buffer of its own first (the kernel's work per run of
  // the peer's outweighs a streaming copy, and without an owner a withdrawn
  // request could not keep the caller's memory alive for a reading peer).
  bool must_gather(int peer, std::span<const mpi_detail::RunGroup> groups, uint64_t bytes,
                   const std::shared_ptr<const void>& owner) const {
    if (!owner) return true;
    if (peer_paths[static_cast<size_t>(peer)] == PeerPath::kSharedMemory && in_our_arena(groups)) return false;
    return mpi_detail::count_runs(groups) * kMinExposedRunBytes > bytes;
  }

  static bool in_our_arena(std::span<const mpi_detail::RunGroup> groups) {
    const execute_detail::SharedArena* arena = execute_detail::SharedArena::for_process();
    return arena != nullptr && std::all_of(groups.begin(), groups.end(), [arena](const mpi_detail::RunGroup& group) {
             return mpi_detail::group_inside(group, arena->base_address(), arena->reserved_bytes());
           });
  }

  // A buffer to gather `bytes` into. Sizes rounded up to a power of two, so
  // that kept buffers serve later messages of other sizes: a fresh one costs
  // a zeroed page per 4 KiB, about as much as the gather itself.
  static Buffer gather_buffer(uint64_t bytes) {
    const size_t rounded = std::bit_ceil(std::max<size_t>(static_cast<size_t>(bytes), 1));
    return execute_detail::StagingCache::for_process().take(rounded);
  }

  // The jobs that gather `groups` into `out`, one after another.
  static void add_gather_jobs(std::span<const mpi_detail::RunGroup> groups, std::byte* out,
                              std::vector<mpi_detail::GatherJob>& jobs) {
    for (const mpi_detail::RunGroup& group : groups) {
      jobs.push_back({group, out});
      out += group.size * group.count;
    }
  }

  std::unique_ptr<Request> start_gathered_send(int peer, Tag tag, Buffer gathered, uint64_t bytes) {
    auto guard = engine.lock();
    engine.throw_if_aborted();
    return std::make_unique<mpi_detail::DirectSend>(engine, peer, tag, direct_channel(peer, tag), std::move(gathered),
                                                    bytes);
  }

  std::unique_ptr<Request> start_direct_send(int peer, Tag tag, std::vector<mpi_detail::RunGroup> groups,
                                             std::shared_ptr<const void> owner,
                                             std::shared_ptr<mpi_detail::PushBatch> batch = nullptr) {
    const uint64_t bytes = mpi_detail::count_bytes(groups);
    if (must_gather(peer, groups, bytes, owner)) {
      Buffer gathered = gather_buffer(bytes);
      std::vector<mpi_detail::GatherJob> jobs;
      add_gather_jobs(groups, gathered.data(), jobs);
      mpi_detail::gather_streaming(jobs);
      return start_gathered_send(peer, tag, std::move(gathered), bytes);
    }
    auto guard = engine.lock();
    engine.throw_if_aborted();
    return std::make_unique<mpi_detail::DirectSend>(engine, peer, tag, direct_channel(peer, tag), std::move(groups),
                                                    bytes, std::move(owner), std::move(batch));
  }

  // A single-copy receive into `runs`. Runs with an owner in our arena are
  // offered to a peer that maps it, to write them itself where that is the
  // faster way; otherwise they are written only while the request is
  // advanced, and need no owner.
  std::unique_ptr<Request> start_direct_receive(int peer, Tag tag, std::vector<mpi_detail::RunGroup> groups,
                                                std::shared_ptr<const void> owner) {
    const uint64_t bytes = mpi_detail::count_bytes(groups);
    const bool offer = senders_write && owner != nullptr && in_our_arena(groups);
    auto guard = engine.lock();
    engine.throw_if_aborted();
    return std::make_unique<mpi_detail::DirectReceive>(engine, peer, tag, direct_channel(peer, tag), std::move(groups),
                                                       bytes, std::move(owner), offer);
  }

  // One message of a derived datatype over `runs`, or null when MPI's int
  // counts cannot describe it (the caller then packs).
  template <typename Run>
  std::unique_ptr<Request> start_typed(bool is_send, int peer, Tag tag, std::span<const Run> runs,
                                       std::shared_ptr<const void> owner) {
    // Without an owner a failure could free the runs under MPI: pack instead.
    if (!options.derived_datatypes || !owner) return nullptr;
    check_peer(peer);
    size_t bytes = 0;
    std::vector<MPI_Aint> addresses;
    std::vector<int> lengths;
    addresses.reserve(runs.size());
    lengths.reserve(runs.size());
    for (const Run& run : runs) {
      if (run.size > static_cast<size_t>(INT_MAX)) return nullptr;
      bytes += run.size;
      MPI_Aint address = 0;
      check_mpi(MPI_Get_address(run.data, &address), "taking a run's address");
      addresses.push_back(address);
      lengths.push_back(static_cast<int>(run.size));
    }
    if (bytes > static_cast<size_t>(INT_MAX) || runs.size() > static_cast<size_t>(INT_MAX)) return nullptr;
    // Runs this short cost MPI more to describe and walk than to pack.
    if (runs.size() > bytes / kMinTypedRunBytes) return nullptr;
    // One message either way: a typed message never exceeds one segment, so it
    // matches a plain request of the same bytes at the other end.
    if (bytes > segment_bytes()) return nullptr;
    const mpi_detail::MpiTagSlot slot = tags.map(tag);
    auto guard = engine.lock();
    engine.throw_if_aborted();
    return std::make_unique<mpi_detail::TypedRequest>(engine, is_send, peer, tag, data[slot.communicator].get(),
                                                      slot.tag, addresses, lengths, bytes, std::move(owner));
  }
};

MpiTransport::MpiTransport(MPI_Comm parent, MpiTransportOptions options) {
  require_mpi_initialized();
  state_ = std::make_unique<State>(parent, validated(options));
  mpi_detail::GivenUpPeers::note_all_present();
  mpi_detail::log_peer_paths(state_->rank, state_->peer_paths);
}

MpiTransport::~MpiTransport() = default;

int MpiTransport::rank() const { return state_->rank; }
int MpiTransport::size() const { return state_->size; }

std::unique_ptr<Request> MpiTransport::isend(int peer, Tag tag, std::span<const std::byte> data) {
  return isend_owned(peer, tag, data, nullptr);
}

std::unique_ptr<Request> MpiTransport::irecv(int peer, Tag tag, std::span<std::byte> data) {
  return irecv_owned(peer, tag, data, nullptr);
}

std::unique_ptr<Request> MpiTransport::isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                                   std::shared_ptr<const void> owner) {
  if (state_->goes_direct(peer)) {
    const ConstByteRun run{data.data(), data.size()};
    return state_->start_direct_send(peer, tag, mpi_detail::group_runs(std::span(&run, 1)), std::move(owner));
  }
  // The buffer is only read; SegmentedMessage holds one pointer for both ways.
  return state_->start(mpi_detail::Direction::kSend, peer, tag, const_cast<std::byte*>(data.data()), data.size(),
                       std::move(owner));
}

std::unique_ptr<Request> MpiTransport::irecv_owned(int peer, Tag tag, std::span<std::byte> data,
                                                   std::shared_ptr<const void> owner) {
  if (state_->goes_direct(peer)) {
    const ByteRun run{data.data(), data.size()};
    return state_->start_direct_receive(peer, tag, mpi_detail::group_runs(std::span(&run, 1)), std::move(owner));
  }
  return state_->start(mpi_detail::Direction::kReceive, peer, tag, data.data(), data.size(), std::move(owner));
}

std::unique_ptr<Request> MpiTransport::isend_gather(int peer, Tag tag, std::span<const ConstByteRun> runs,
                                                    std::shared_ptr<const void> owner) {
  if (state_->goes_direct(peer)) {
    return state_->start_direct_send(peer, tag, mpi_detail::group_runs(runs), std::move(owner));
  }
  if (auto request = state_->start_typed(true, peer, tag, runs, owner)) return request;
  return without_fast_path::isend_gather(*this, peer, tag, runs);
}

std::vector<std::unique_ptr<Request>> MpiTransport::isend_gather_all(std::span<const GatherSend> sends,
                                                                    int threads) {
  auto batch = std::make_shared<mpi_detail::PushBatch>();
  batch->threads = threads;
  return start_batch(sends, std::move(batch));
}

bool MpiTransport::sends_in_place(int peer, std::span<const ConstRunRows> rows) const {
  if (peer < 0 || peer >= state_->size || state_->peer_paths[static_cast<size_t>(peer)] != PeerPath::kSharedMemory) {
    return false;
  }
  return State::in_our_arena(mpi_detail::group_rows(rows));
}

bool MpiTransport::receives_in_place(int peer) const { return state_->goes_direct(peer); }

bool MpiTransport::copies_with_sends() const {
  return std::find(state_->peer_paths.begin(), state_->peer_paths.end(), PeerPath::kSharedMemory) !=
         state_->peer_paths.end();
}

std::vector<std::unique_ptr<Request>> MpiTransport::isend_gather_all_with_copies(std::span<const GatherSend> sends,
                                                                                int threads,
                                                                                std::span<const LocalCopy> copies) {
  auto batch = std::make_shared<mpi_detail::PushBatch>();
  batch->threads = threads;
  uint64_t bytes = 0;
  for (const LocalCopy& copy : copies) {
    const std::vector<mpi_detail::RunGroup> from = mpi_detail::group_rows(copy.from);
    const std::vector<mpi_detail::RunGroup> to = mpi_detail::group_rows(copy.to);
    const uint64_t copy_bytes = mpi_detail::count_bytes(from);
    if (mpi_detail::count_bytes(to) != copy_bytes) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("rank {}: a copy within the process from {} bytes into {}", state_->rank, copy_bytes,
                              mpi_detail::count_bytes(to)));
    }
    const std::vector<mpi_detail::GatherJob> jobs = mpi_detail::row_copies_between_runs(to, from, copy_bytes);
    batch->copies.insert(batch->copies.end(), jobs.begin(), jobs.end());
    bytes += copy_bytes;
  }
  std::vector<std::unique_ptr<Request>> requests = start_batch(sends, batch);
  auto guard = state_->engine.lock();
  requests.push_back(std::make_unique<mpi_detail::BatchCopies>(state_->engine, std::move(batch), bytes));
  return requests;
}

std::vector<std::unique_ptr<Request>> MpiTransport::start_batch(std::span<const GatherSend> sends,
                                                               std::shared_ptr<mpi_detail::PushBatch> batch) {
  const int threads = batch->threads;
  // First every gather of the batch in one walk, then every send in order.
  struct Gathered {
    Buffer buffer;
    uint64_t bytes = 0;
  };
  std::vector<std::optional<Gathered>> gathered(sends.size());
  std::vector<std::vector<mpi_detail::RunGroup>> groups(sends.size());
  std::vector<mpi_detail::GatherJob> jobs;
  for (size_t i = 0; i < sends.size(); ++i) {
    const GatherSend& send = sends[i];
    if (!state_->goes_direct(send.peer)) continue;
    groups[i] = mpi_detail::group_rows(send.rows);
    const uint64_t bytes = mpi_detail::count_bytes(groups[i]);
    if (!state_->must_gather(send.peer, groups[i], bytes, send.owner)) continue;
    gathered[i] = Gathered{State::gather_buffer(bytes), bytes};
    State::add_gather_jobs(groups[i], gathered[i]->buffer.data(), jobs);
  }
  mpi_detail::gather_streaming(jobs, threads);
  // The sends that turn out to write into their receivers write together.
  std::vector<std::unique_ptr<Request>> requests;
  requests.reserve(sends.size());
  for (size_t i = 0; i < sends.size(); ++i) {
    const GatherSend& send = sends[i];
    if (gathered[i]) {
      requests.push_back(state_->start_gathered_send(send.peer, send.tag, std::move(gathered[i]->buffer),
                                                     gathered[i]->bytes));
    } else if (state_->goes_direct(send.peer)) {
      requests.push_back(state_->start_direct_send(send.peer, send.tag, std::move(groups[i]), send.owner, batch));
    } else {
      requests.push_back(std::move(without_fast_path::isend_gather_all(*this, std::span(&send, 1)).front()));
    }
  }
  return requests;
}

std::unique_ptr<Request> MpiTransport::irecv_scatter(int peer, Tag tag, std::span<const ByteRun> runs,
                                                     std::shared_ptr<const void> owner) {
  if (state_->goes_direct(peer)) {
    return state_->start_direct_receive(peer, tag, mpi_detail::group_runs(runs), std::move(owner));
  }
  if (auto request = state_->start_typed(false, peer, tag, runs, owner)) return request;
  return without_fast_path::irecv_scatter(*this, peer, tag, runs);
}

std::unique_ptr<Request> MpiTransport::irecv_scatter_rows(int peer, Tag tag, std::span<const RunRows> rows,
                                                          std::shared_ptr<const void> owner) {
  if (state_->goes_direct(peer)) {
    return state_->start_direct_receive(peer, tag, mpi_detail::group_rows(rows), std::move(owner));
  }
  return without_fast_path::irecv_scatter_rows(*this, peer, tag, rows, std::move(owner));
}

std::vector<std::vector<std::byte>> MpiTransport::all_gather(std::span<const std::byte> local) {
  // Collectives are called in the same order everywhere, so a counter gives
  // every rank the same fresh tag; one finishes before the next begins.
  const uint64_t sequence = state_->next_collective++;
  const int tag = static_cast<int>(sequence % (static_cast<uint64_t>(state_->tag_ub) + 1));
  return mpi_detail::all_gather_bytes(state_->engine, state_->collective.get(), tag, state_->size, local);
}

void MpiTransport::barrier() { mpi_detail::barrier(state_->engine, state_->collective.get()); }

bool MpiTransport::all_equal(uint64_t value) {
  return mpi_detail::all_equal(state_->engine, state_->collective.get(), value);
}

TransportCounters MpiTransport::counters() const { return state_->engine.counters(); }

Tag MpiTransport::begin_operation() { return state_->next_operation++ * kTagsPerOperation; }

void MpiTransport::set_timeout(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("timeout {} ms must be positive", timeout.count()));
  }
  state_->engine.set_timeout(timeout);
}

std::chrono::milliseconds MpiTransport::timeout() const { return state_->engine.timeout(); }

void MpiTransport::abort(std::string_view reason) noexcept { state_->engine.abort(reason); }

const MpiTransportOptions& MpiTransport::options() const { return state_->options; }

bool MpiTransport::copies_directly_with(int peer) const { return state_->goes_direct(peer); }

PeerPath MpiTransport::path_to(int peer) const {
  if (peer < 0 || peer >= state_->size) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("rank {} is not in this job of {} processes", peer, state_->size));
  }
  return state_->peer_paths[static_cast<size_t>(peer)];
}

int MpiTransport::processes_on_this_host() const { return state_->processes_on_host; }

FastPaths MpiTransport::fast_paths() { return {.owned = this, .runs = this, .in_place = this, .host = this}; }

int MpiTransport::host_of(int rank) const {
  state_->check_peer(rank);
  return state_->host_of[static_cast<size_t>(rank)];
}

std::string MpiTransport::host_name(int rank) const {
  state_->check_peer(rank);
  return state_->host_names[static_cast<size_t>(rank)];
}

std::string MpiTransport::describe_paths() const {
  return mpi_detail::describe_peer_paths(state_->rank, state_->peer_paths);
}

size_t MpiTransport::peak_bytes_in_flight() const { return state_->engine.peak_bytes_in_flight(); }

}  // namespace reshard
