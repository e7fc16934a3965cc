// Runs one function per rank on threads of this process (as Gloo's base_test does).
#pragma once

#include <chrono>
#include <functional>

#include "reshard/execute/in_process_transport.h"

namespace reshard::testing {

using RankBody = std::function<void(Transport& transport)>;

// Runs `body` on one thread per rank of `group` and waits for all; the
// first failure, root causes first, is rethrown (InProcessGroup::run).
void run_ranks(InProcessGroup& group, const RankBody& body);

// The same on a fresh group of `ranks` with the given transport timeout.
void run_ranks(int ranks, const RankBody& body, std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace reshard::testing
