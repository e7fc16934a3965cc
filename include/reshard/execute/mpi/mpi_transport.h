// MpiTransport: the Transport between the processes of an MPI job.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>

#include "reshard/execute/transport.h"

namespace reshard {

struct MpiTransportOptions {
  // The largest single MPI message; larger transfers are split (MPI counts are
  // int, so chunks never exceed INT_MAX bytes whatever this says).
  size_t chunk_bytes = size_t{8} << 20;
  // Bytes posted to MPI and not yet complete, over all pending requests. Each
  // request may always keep one chunk posted, so that no request can starve
  // another into a deadlock: the bound is this plus one chunk per further
  // pending request.
  size_t max_bytes_in_flight = size_t{128} << 20;
  // A wait fails with Error(kTimeout) after this long without progress.
  std::chrono::milliseconds timeout{std::chrono::minutes(2)};
  // Operations that may be in flight at once without their tags colliding.
  size_t concurrent_operations = 16;
  // Gathered sends and scattered receives (strided pieces) as one message of
  // an MPI derived datatype instead of packed into a staging buffer. Off by
  // default: on Open MPI 4.1 over shared memory, packing measured faster
  // (`reshard bench reshard` under mpirun reports both).
  bool derived_datatypes = false;
};

// Point-to-point transfers are non-blocking MPI_Isend/MPI_Irecv, chunked, with
// a bound on the bytes in flight; all_gather is built on the same non-blocking
// calls, barrier and all_equal on MPI_Ibarrier and MPI_Iallreduce. Every wait polls with a deadline instead of blocking in
// MPI, so a peer that is gone shows up as Error(kTimeout) naming it (or
// Error(kPeerFailed) when the peer announced its failure) instead of a hang.
//
// Traffic runs on communicators duplicated from the parent at construction,
// with MPI_ERRORS_RETURN, so it never mixes with the caller's messages and MPI
// errors become typed errors. All MPI calls are serialised by one lock, so any
// thread may use the transport whatever thread level MPI provides. Requests
// must not outlive their transport; a request destroyed before completion is
// cancelled (its buffer may still be written until the job ends).
class MpiTransport final : public Transport {
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
  // With options().derived_datatypes, one MPI message of a derived datatype
  // (hindexed over the runs), so MPI moves the bytes between the runs and the
  // wire without a packing pass of ours; otherwise, or when the message
  // exceeds one chunk or its runs average under 64 bytes, packed as Transport
  // does. Either way it matches a plain isend/irecv of the same bytes.
  std::unique_ptr<Request> isend_gather(int peer, Tag tag, std::span<const ConstByteRun> runs) override;
  std::unique_ptr<Request> irecv_scatter(int peer, Tag tag, std::span<const ByteRun> runs) override;
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> local) override;
  void barrier() override;
  bool all_equal(uint64_t value) override;
  TransportCounters counters() const override;
  Tag begin_operation() override;
  void set_timeout(std::chrono::milliseconds timeout) override;
  std::chrono::milliseconds timeout() const override;

  // Marks this process failed: every peer's pending and later waits throw
  // Error(kPeerFailed) naming this rank and `reason`, and so do this
  // transport's own from now on. Sends a notice on a communicator of its own
  // and lingers briefly so that peers can report it before the job is torn
  // down (MpiSession::abort_job). Never throws.
  void abort(std::string_view reason) noexcept override;

  const MpiTransportOptions& options() const;
  // The most bytes that were ever posted to MPI and incomplete at once.
  size_t peak_bytes_in_flight() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace reshard
