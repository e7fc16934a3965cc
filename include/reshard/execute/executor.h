// The executor: runs a plan for this process, copying locally and exchanging through a transport.
#pragma once

#include <cstdint>
#include <span>

#include "reshard/execute/sharded_array.h"
#include "reshard/execute/transport.h"
#include "reshard/plan/plan.h"

namespace reshard {

struct ExecuteOptions {
  // Threads for copies within this process. 0: the host's hardware threads
  // shared evenly among the job's processes on it (processes_on_this_host,
  // transport_calls.h), at least one, so a host with fewer cores than
  // processes runs each one's copies on its calling thread alone.
  int threads = 0;
  // The largest message between two processes.
  uint64_t message_bytes = uint64_t{8} << 20;
  // Bytes of messages posted and not yet completed, per direction, that hold
  // memory of the transport's own (staging buffers). One message is always
  // allowed, however large. Messages the transport moves in place (between
  // processes of a host, straight from rows to rows: sends_in_place)
  // hold none and are not counted here; at most 256 of them each way.
  uint64_t max_bytes_in_flight = uint64_t{64} << 20;

  // `threads`, or when it is 0 the hardware's thread count divided among
  // `processes_on_host` processes (at least 1).
  int copy_threads(int processes_on_host = 1) const;
};

// What one process did.
struct ExecuteStats {
  uint64_t bytes_copied = 0;  // within this process (same device or not)
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
};

// Fills `dst` (this process's shards of the plan's target layout) from `src`
// (its shards of the source layout). Collective: every process of `transport`
// calls it with the same plan and options, and they check that they agree.
// Stage-0 copies within the process run on `options.threads` threads while
// messages to and from other processes flow in the order of
// schedule_messages; stage-1 copies (target device to target device of one
// process) follow once the stage-0 bytes they read are in place.
// On any failure here the transport is aborted, so that the other processes
// stop with Error(kPeerFailed) instead of waiting, and the error is rethrown.
ExecuteStats execute(const Plan& plan, const ShardedArray& src, ShardedArray& dst, Transport& transport,
                     const ExecuteOptions& options = {});

// Many arrays as one operation: dst[i] is filled from src[i] by plans[i]
// (all three the same length, else Error(kInvalidArgument)). Between each
// pair of processes the pieces of all arrays travel in the same bounded
// messages under one in-flight budget, and the processes check once, for the
// whole batch, that they run the same plans.
ExecuteStats execute(std::span<const Plan> plans, std::span<const ShardedArray> src, std::span<ShardedArray> dst,
                     Transport& transport, const ExecuteOptions& options = {});

}  // namespace reshard
