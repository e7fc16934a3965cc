#include "all_gather.h"

#include <climits>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mpi_error.h"
#include "orphans.h"
#include "reshard/layout/error.h"

namespace reshard::mpi_detail {
namespace {

// One all-gather in progress. Lives on the heap: if the wait fails, MPI may
// still read or write its buffers, so its pending requests go to Orphans,
// each keeping the Gather alive until MPI is done with it.
struct Gather {
  std::vector<std::vector<std::byte>> parts;
  std::vector<MPI_Request> sends;
  std::vector<MPI_Request> receives;
  std::vector<bool> matched;  // the peer's message was probed and its receive posted

  explicit Gather(size_t size)
      : parts(size), sends(size, MPI_REQUEST_NULL), receives(size, MPI_REQUEST_NULL), matched(size, false) {}

};

// Leaves the gather's pending requests to Orphans, sharing the gather.
void orphan_pending(const std::shared_ptr<Gather>& gather) noexcept {
  for (auto* requests : {&gather->sends, &gather->receives}) {
    for (MPI_Request& r : *requests) {
      if (r == MPI_REQUEST_NULL) continue;
      Orphans::instance().adopt(r, gather);
      r = MPI_REQUEST_NULL;
    }
  }
}

// Posts the receive of `peer`'s part once its message has arrived.
bool try_match(Gather& gather, MPI_Comm comm, int tag, int peer) {
  int arrived = 0;
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  check_mpi(MPI_Improbe(peer, tag, comm, &arrived, &message, &status), fmt::format("probing rank {}", peer));
  if (arrived == 0) return false;
  int count = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "reading a message size");
  auto& part = gather.parts[static_cast<size_t>(peer)];
  part.resize(static_cast<size_t>(count));
  check_mpi(MPI_Imrecv(part.data(), count, MPI_BYTE, &message, &gather.receives[static_cast<size_t>(peer)]),
            fmt::format("receiving from rank {}", peer));
  gather.matched[static_cast<size_t>(peer)] = true;
  return true;
}

// Tests a pending request; true when it completed just now.
bool try_complete(MPI_Request& request, std::string_view what) {
  if (request == MPI_REQUEST_NULL) return false;
  int finished = 0;
  check_mpi(MPI_Test(&request, &finished, MPI_STATUS_IGNORE), what);
  return finished != 0;
}

WaitStep gather_step(Gather& gather, MPI_Comm comm, int tag, int self) {
  bool progressed = false;
  bool done = true;
  for (int peer = 0; peer < static_cast<int>(gather.parts.size()); ++peer) {
    if (peer == self) continue;
    const auto p = static_cast<size_t>(peer);
    if (!gather.matched[p]) progressed |= try_match(gather, comm, tag, peer);
    progressed |= try_complete(gather.receives[p], fmt::format("receiving from rank {}", peer));
    progressed |= try_complete(gather.sends[p], fmt::format("sending to rank {}", peer));
    done = done && gather.matched[p] && gather.receives[p] == MPI_REQUEST_NULL &&
           gather.sends[p] == MPI_REQUEST_NULL;
  }
  if (done) return WaitStep::kDone;
  return progressed ? WaitStep::kProgressed : WaitStep::kIdle;
}

std::string missing_ranks(const Gather& gather, int self) {
  std::vector<int> silent;
  std::vector<int> not_receiving;
  for (int peer = 0; peer < static_cast<int>(gather.parts.size()); ++peer) {
    if (peer == self) continue;
    const auto p = static_cast<size_t>(peer);
    if (!gather.matched[p] || gather.receives[p] != MPI_REQUEST_NULL) silent.push_back(peer);
    if (gather.sends[p] != MPI_REQUEST_NULL) not_receiving.push_back(peer);
  }
  if (!silent.empty()) return fmt::format("gathering metadata, waiting for rank(s) {}", fmt::join(silent, ", "));
  return fmt::format("gathering metadata, waiting for rank(s) {} to receive ours", fmt::join(not_receiving, ", "));
}

// The ranks a gather still needs something from.
std::vector<int> awaited(const Gather& gather, int self) {
  std::vector<int> peers;
  for (int peer = 0; peer < static_cast<int>(gather.parts.size()); ++peer) {
    const auto p = static_cast<size_t>(peer);
    if (peer != self && (!gather.matched[p] || gather.receives[p] != MPI_REQUEST_NULL ||
                         gather.sends[p] != MPI_REQUEST_NULL)) {
      peers.push_back(peer);
    }
  }
  return peers;
}

}  // namespace

std::vector<std::vector<std::byte>> all_gather_bytes(ProgressEngine& engine, MPI_Comm comm, int tag, int size,
                                                     std::span<const std::byte> local) {
  if (local.size() > static_cast<size_t>(INT_MAX)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("all_gather of {} bytes: metadata must be under {} bytes", local.size(), INT_MAX));
  }
  const int self = engine.rank();
  auto gather = std::make_shared<Gather>(static_cast<size_t>(size));
  // Sent from the gather's copy, which outlives a failed wait; not from the caller's.
  std::vector<std::byte>& mine = gather->parts[static_cast<size_t>(self)];
  mine.assign(local.begin(), local.end());
  try {
    {
      auto guard = engine.lock();
      for (int peer = 0; peer < size; ++peer) {
        if (peer == self) continue;
        check_mpi(MPI_Isend(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, peer, tag, comm,
                            &gather->sends[static_cast<size_t>(peer)]),
                  fmt::format("rank {}: sending metadata to rank {}", self, peer));
      }
    }
    engine.wait(WaitFor{[&] { return gather_step(*gather, comm, tag, self); },
                        [&] { return missing_ranks(*gather, self); }, [&] { return awaited(*gather, self); }});
  } catch (...) {
    auto guard = engine.lock();
    orphan_pending(gather);
    throw;
  }
  return std::move(gather->parts);
}

}  // namespace reshard::mpi_detail
