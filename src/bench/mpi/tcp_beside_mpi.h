// For `reshard bench reshard` under mpirun: the same job's processes joined
// a second time, by the TCP transport, so that one run measures both.
#pragma once

#include <memory>

#include "reshard/execute/tcp_transport.h"

namespace reshard::bench {

// Collective over `mpi` (every rank calls it): rank 0 serves the rendezvous
// on its first non-loopback IPv4 address (127.0.0.1 if it has none) at a
// free port, found and announced through `mpi`.
std::unique_ptr<TcpTransport> tcp_beside(Transport& mpi);

}  // namespace reshard::bench
