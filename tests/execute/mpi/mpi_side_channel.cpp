#include "mpi_side_channel.h"

#include <gtest/gtest.h>

namespace reshard::testing {

MpiSideChannel::MpiSideChannel(MPI_Comm comm) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  EXPECT_EQ(level, MPI_THREAD_MULTIPLE) << "a side channel's notify runs beside the transport's calls";
  MPI_Comm_dup(comm, &comm_);
}

MpiSideChannel::~MpiSideChannel() { MPI_Comm_free(&comm_); }

void MpiSideChannel::notify(int rank) { MPI_Send(nullptr, 0, MPI_BYTE, rank, 0, comm_); }

void MpiSideChannel::await(int /*self*/) {
  MPI_Recv(nullptr, 0, MPI_BYTE, MPI_ANY_SOURCE, 0, comm_, MPI_STATUS_IGNORE);
}

}  // namespace reshard::testing
