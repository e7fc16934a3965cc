// Communicator: an owned duplicate of an MPI communicator that returns errors.
#pragma once

#include <mpi.h>

namespace reshard::mpi_detail {

// MPI_Comm_dup of the parent with MPI_ERRORS_RETURN, so that MPI errors on it
// come back as codes to turn into typed errors instead of aborting the job.
// Collective to create.
//
// Not freed on destruction but retired, and freed only by free_retired()
// before MPI_Finalize: peers may still have messages on their way to it (a
// heartbeat, the rest of a failed transfer), and once freed, MPI may give
// its context id to a new communicator, into which those stale messages
// would then be delivered. A few communicators per transport are kept.
class Communicator {
 public:
  // Throws Error(kTransport) if MPI fails.
  explicit Communicator(MPI_Comm parent);
  ~Communicator();
  Communicator(Communicator&& other) noexcept : comm_(other.comm_) { other.comm_ = MPI_COMM_NULL; }
  Communicator& operator=(Communicator&&) = delete;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  MPI_Comm get() const { return comm_; }
  // Frees every retired communicator; MpiSession calls it before MPI_Finalize.
  static void free_retired() noexcept;
  int rank() const;
  int size() const;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace reshard::mpi_detail
