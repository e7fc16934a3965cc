// SideChannel between the processes of an MPI job: empty messages on a
// duplicate of a communicator, apart from the transport under test.
#pragma once

#include <mpi.h>

#include "execute/support/side_channel.h"

namespace reshard::testing {

// Collective: construct and destroy on every rank of `comm`. Needs MPI_THREAD_MULTIPLE
// (notify() runs beside a rank's transport calls); fails the test otherwise.
class MpiSideChannel final : public SideChannel {
 public:
  explicit MpiSideChannel(MPI_Comm comm);
  ~MpiSideChannel() override;
  MpiSideChannel(const MpiSideChannel&) = delete;
  MpiSideChannel& operator=(const MpiSideChannel&) = delete;

  void notify(int rank) override;
  void await(int self) override;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace reshard::testing
