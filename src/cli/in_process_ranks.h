// A job whose processes are threads of this one (InProcessGroup), for
// commands that show a multi-process run without a launcher.
#pragma once

#include <chrono>
#include <functional>

#include "reshard/execute/transport.h"

namespace reshard::cli {

// Runs `body` on one thread per rank, each with its rank's transport, and
// waits for all. A rank that throws marks the group failed, so the others
// stop instead of waiting on it; the first failure that is not only another
// rank's (kPeerFailed) is rethrown here.
void run_in_process_ranks(int ranks, std::chrono::milliseconds timeout, const std::function<void(Transport&)>& body);

}  // namespace reshard::cli
