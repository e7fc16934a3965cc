// The executor over a batch of array moves, for the operations that hold their plans by pointer.
#pragma once

#include <span>

#include "array_move.h"
#include "reshard/execute/executor.h"

namespace reshard::execute_detail {

// execute() of a batch, with the transport aborted on failure. Every move's
// plan, src and dst must be non-null.
ExecuteStats execute_moves(std::span<const ArrayMove> moves, Transport& transport, const ExecuteOptions& options);

}  // namespace reshard::execute_detail
