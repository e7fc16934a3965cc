#include "communicator.h"

#include "mpi_error.h"

namespace reshard::mpi_detail {

Communicator::Communicator(MPI_Comm parent) {
  check_mpi(MPI_Comm_dup(parent, &comm_), "duplicating the communicator");
  const int code = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  if (code != MPI_SUCCESS) MPI_Comm_free(&comm_);
  check_mpi(code, "setting MPI_ERRORS_RETURN");
}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && finalized == 0) MPI_Comm_free(&comm_);
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
