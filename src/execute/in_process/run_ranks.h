// Running a job whose processes are threads of this one: one thread per rank
// of an InProcessGroup, failures handed back as a launcher would report them.
#pragma once

#include <functional>

#include "reshard/execute/in_process_transport.h"

namespace reshard::in_process {

// Runs `body` on one thread per rank of `group`, each with its rank's
// transport, and waits for all. A rank that throws marks the group failed, so
// the others stop instead of waiting on it. The first failure is rethrown
// here, preferring a root cause to the kPeerFailed errors it caused elsewhere.
void run_ranks(InProcessGroup& group, const std::function<void(Transport&)>& body);

}  // namespace reshard::in_process
