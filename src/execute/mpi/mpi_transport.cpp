#include "reshard/execute/mpi/mpi_transport.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <vector>

#include <fmt/format.h>

#include "all_gather.h"
#include "chunked_request.h"
#include "communicator.h"
#include "mpi_error.h"
#include "progress_engine.h"
#include "tag_map.h"
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

void validate(const MpiTransportOptions& options) {
  if (options.chunk_bytes == 0 || options.max_bytes_in_flight == 0 || options.concurrent_operations == 0 ||
      options.timeout.count() <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("MPI transport options: chunk_bytes ({}), max_bytes_in_flight ({}), "
                            "concurrent_operations ({}) and timeout ({} ms) must all be positive",
                            options.chunk_bytes, options.max_bytes_in_flight, options.concurrent_operations,
                            options.timeout.count()));
  }
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

}  // namespace

// The communicators (failure notices, collectives, and the tag ring's data
// communicators), the tag map and the progress engine. Members are destroyed
// in reverse, so the engine goes before the communicators it uses.
struct MpiTransport::State {
  MpiTransportOptions options;
  mpi_detail::Communicator control;
  mpi_detail::Communicator collective;
  std::vector<mpi_detail::Communicator> data;
  int rank = 0;
  int size = 1;
  int tag_ub = 32767;
  TagMap tags;
  mpi_detail::ProgressEngine engine;
  std::atomic<uint64_t> next_operation{0};
  uint64_t next_collective = 0;

  State(MPI_Comm parent, MpiTransportOptions opts)
      : options(opts), control(parent), collective(parent), rank(control.rank()), size(control.size()),
        tag_ub(mpi_tag_ub()), tags(tag_ub, options.concurrent_operations),
        engine(rank, size, control.get(), options.max_bytes_in_flight, options.timeout) {
    data.reserve(tags.num_communicators());
    for (size_t i = 0; i < tags.num_communicators(); ++i) data.emplace_back(parent);
  }

  size_t chunk_bytes() const { return std::min(options.chunk_bytes, static_cast<size_t>(INT_MAX)); }

  void check_peer(int peer) const {
    if (peer < 0 || peer >= size) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("rank {}: peer rank {} is outside this job of {} processes", rank, peer, size));
    }
  }

  std::unique_ptr<Request> start(mpi_detail::Direction direction, int peer, Tag tag, std::byte* data_ptr,
                                 size_t bytes) {
    check_peer(peer);
    const MpiTagSlot slot = tags.map(tag);
    mpi_detail::ChunkedMessage message{direction, peer, tag, data[slot.communicator].get(), slot.tag, data_ptr,
                                       bytes};
    auto guard = engine.lock();
    engine.throw_if_aborted();
    return std::make_unique<mpi_detail::ChunkedRequest>(engine, message, chunk_bytes());
  }
};

MpiTransport::MpiTransport(MPI_Comm parent, MpiTransportOptions options) {
  validate(options);
  require_mpi_initialized();
  state_ = std::make_unique<State>(parent, options);
}

MpiTransport::~MpiTransport() = default;

int MpiTransport::rank() const { return state_->rank; }
int MpiTransport::size() const { return state_->size; }

std::unique_ptr<Request> MpiTransport::isend(int peer, Tag tag, std::span<const std::byte> data) {
  // The buffer is only read; ChunkedMessage holds one pointer for both ways.
  return state_->start(mpi_detail::Direction::kSend, peer, tag, const_cast<std::byte*>(data.data()), data.size());
}

std::unique_ptr<Request> MpiTransport::irecv(int peer, Tag tag, std::span<std::byte> data) {
  return state_->start(mpi_detail::Direction::kReceive, peer, tag, data.data(), data.size());
}

std::vector<std::vector<std::byte>> MpiTransport::all_gather(std::span<const std::byte> local) {
  // Collectives are called in the same order everywhere, so a counter gives
  // every rank the same fresh tag; one finishes before the next begins.
  const uint64_t sequence = state_->next_collective++;
  const int tag = static_cast<int>(sequence % (static_cast<uint64_t>(state_->tag_ub) + 1));
  return mpi_detail::all_gather_bytes(state_->engine, state_->collective.get(), tag, state_->size, local);
}

void MpiTransport::barrier() { all_gather({}); }

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

size_t MpiTransport::peak_bytes_in_flight() const { return state_->engine.peak_bytes_in_flight(); }

}  // namespace reshard
