// The conformance suite every Transport passes: named cases, each run on every rank.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "execute/support/side_channel.h"
#include "reshard/execute/transport.h"

namespace reshard::testing {

// One behaviour every transport must have. `run` is called on every rank of a
// job at once (threads of one process, or MPI processes: it assumes neither),
// checks with GoogleTest's EXPECT macros, and never waits on a check's outcome,
// so a failed check cannot hang the other ranks. Works at any number of ranks.
// `side` carries events beside the transport (one channel for all the ranks
// of one run of the case).
struct TransportCase {
  std::string name;
  std::function<void(Transport& transport, SideChannel& side)> run;
};

// Every case, in a fixed order; each takes its own tags from begin_operation().
std::vector<TransportCase> transport_cases();

}  // namespace reshard::testing
