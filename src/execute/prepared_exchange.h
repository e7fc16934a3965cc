// PreparedExchange: what one process's part of an operation derives from its plans alone, kept for the next one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "array_move.h"
#include "layout/box_copy.h"
#include "message_schedule.h"

namespace reshard {

// One process's messages of one stage of a batch, with the box copy of every
// piece on this process's side (from its source shard for a send, into its
// target shard for a receive), and the stage's copies within the process. They depend on the plans only, not on the
// arrays' memory, so an operation over the same plans as a recent one
// (a training loop resharding the same layouts again and again) takes them
// as they were: for a model's tens of thousands of pieces, deriving them
// cost about a fifth of each batched reshard.
struct PreparedExchange {
  ProcessMessages messages;
  std::vector<std::vector<BoxCopy>> send_copies;     // [send][piece]
  std::vector<std::vector<BoxCopy>> receive_copies;  // [receive][piece]
  // The stage's copies within this process: transfer `transfer` of array `array`.
  struct LocalCopy {
    size_t array = 0;
    size_t transfer = 0;
    BoxCopy copy;
  };
  std::vector<LocalCopy> local;
};

// The prepared exchange of `process` for stage `stage` of `moves` (see
// schedule_messages), from a small cache of recent ones (per process, keyed
// by the plans' keys and transfers, the chunk size and the stage), or made
// and kept. Thread-safe: in-process ranks run side by side.
std::shared_ptr<const PreparedExchange> prepare_exchange(std::span<const ArrayMove> moves, int process,
                                                         uint64_t chunk_bytes, int stage);

}  // namespace reshard
