// Orphans: MPI requests that outlived the reshard request which posted them.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace reshard::mpi_detail {

// A request that ends before MPI is done with its bytes (a transfer cut short
// by a failure: a matched receive whose data is still coming, a send its peer
// has not taken) leaves its MPI requests here, each with a share of what
// keeps its memory alive. MPI may read or write that memory until it
// completes the request, so the memory goes back only then; whatever is left
// when MPI is finalized goes back after MPI_Finalize, when nothing can touch
// it any more. Process-wide: requests outlive their transport and its
// communicators (MPI completes them after MPI_Comm_free). Thread-safe.
class Orphans {
 public:
  static Orphans& instance();

  // Keeps `owner` alive until MPI completes `request` (never MPI_REQUEST_NULL).
  // A collective's request is not `cancellable` (MPI forbids MPI_Cancel on it).
  void adopt(MPI_Request request, std::shared_ptr<const void> owner, bool cancellable = true);

  // Keeps `owner` alive until MPI is finalized: memory another process may
  // still copy to or from directly, with no MPI request to say when it is done.
  void keep_until_finalized(std::shared_ptr<const void> owner);

  // Tests every orphan and lets go of those MPI has finished with. Cheap when
  // there are none; skipped if another thread is reaping.
  void reap() noexcept;

  // Orphans not yet completed.
  size_t size() const;

  // Before MPI_Finalize: asks MPI to cancel what is left (but collectives) and reaps for at most
  // `patience` (a matched receive cannot be cancelled, and a send to a dead
  // peer may never complete).
  void cancel_all(std::chrono::milliseconds patience) noexcept;

  // After MPI_Finalize: MPI holds nothing any more, so every owner goes back.
  void forget_all() noexcept;

 private:
  struct Orphan {
    MPI_Request request;
    std::shared_ptr<const void> owner;
    bool cancellable;
  };
  mutable std::mutex mutex_;
  std::vector<Orphan> orphans_;
  std::vector<std::shared_ptr<const void>> kept_;
};

}  // namespace reshard::mpi_detail
