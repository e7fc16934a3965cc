// The messages a plan's cross-process transfers become, derived identically on every process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "reshard/execute/transport.h"
#include "reshard/plan/plan.h"

namespace reshard::execute_detail {

// Bytes [begin, end) of one transfer's box (in the box's row-major order),
// stored at `offset` in its message.
struct MessagePiece {
  size_t array = 0;     // which plan of the batch
  size_t transfer = 0;  // index into that plan's transfers()
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
};

// One message from one process to another. Between each pair of processes the
// cross-process transfers of one stage of every plan of the batch are streamed in
// order (plan by plan, each in its own order) and cut into messages of at most
// the message size, so small transfers, of one array or of several, share a
// message and large ones span several.
struct Message {
  int src_process = 0;
  int dst_process = 0;
  uint64_t index = 0;  // position among this pair's messages; also its tag within the operation
  uint64_t bytes = 0;
  std::vector<MessagePiece> pieces;

  // The global order every process walks messages in: round by round (the
  // index), and within a round staggered by (dst - src) mod P so that every
  // process sends to a different peer at once, as all-to-all exchanges do.
  // Waiting on messages in this one order never deadlocks.
  bool comes_before(const Message& other, int num_processes) const;
};

// What one process sends and receives, each in the global order.
struct ProcessMessages {
  std::vector<Message> sends;
  std::vector<Message> receives;
};

// The messages of `process` for a batch of plans (one operation), at most
// `message_bytes` each (more when a pair would otherwise need more than
// Transport::kTagsPerOperation messages), from the cross-process transfers of
// `stage` (0: from the source arrays; 2: between processes of a host, from
// target shards). Throws Error(kInvalidArgument) when message_bytes is 0.
ProcessMessages schedule_messages(std::span<const Plan* const> plans, int process, uint64_t message_bytes,
                                  int stage = 0);

// The batch of one.
ProcessMessages schedule_messages(const Plan& plan, int process, uint64_t message_bytes);

}  // namespace reshard::execute_detail
