// Links against reshard::mpi from the installed package: one job over MPI's
// world when an MPI launcher started it, else nothing to do.
#include "reshard/mpi.h"

int main() {
  if (!reshard::launched_by_mpi()) return 0;
  reshard::MpiSession session;
  reshard::MpiTransport transport;
  transport.barrier();
  return 0;
}
