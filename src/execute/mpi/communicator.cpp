#include "communicator.h"

#include <mutex>
#include <vector>

#include "mpi_error.h"

namespace reshard::mpi_detail {
namespace {

struct Retired {
  std::mutex mutex;
  std::vector<MPI_Comm> comms;
};

Retired& retired() {
  static Retired instance;
  return instance;
}

}  // namespace

Communicator::Communicator(MPI_Comm parent) {
  check_mpi(MPI_Comm_dup(parent, &comm_), "duplicating the communicator");
  const int code = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  if (code != MPI_SUCCESS) MPI_Comm_free(&comm_);
  check_mpi(code, "setting MPI_ERRORS_RETURN");
}

Communicator::~Communicator() {
  if (comm_ == MPI_COMM_NULL) return;
  try {
    const std::lock_guard guard(retired().mutex);
    retired().comms.push_back(comm_);
  } catch (...) {
    // No memory to remember it: MPI keeps it until finalized, which is safe.
  }
}

void Communicator::free_retired() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  const std::lock_guard guard(retired().mutex);
  if (finalized == 0) {
    for (MPI_Comm& comm : retired().comms) MPI_Comm_free(&comm);
  }
  retired().comms.clear();
}

int Communicator::rank() const {
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm_, &rank), "reading the rank");
  return rank;
}

int Communicator::size() const {
  int size = 0;
  check_mpi(MPI_Comm_size(comm_, &size), "reading the size");
  return size;
}

}  // namespace reshard::mpi_detail
