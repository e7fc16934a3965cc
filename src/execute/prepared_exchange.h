// PreparedExchange: what one process's part of an operation derives from its plans alone, kept for the next one.
#pragma once

#include <cstdint>
#include <compare>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "array_move.h"
#include "layout/box_copy.h"
#include "reshard/layout/byte_run.h"
#include "message_schedule.h"

namespace reshard::execute_detail {

struct ExchangeRows;

// One process's messages of one stage of a batch, with the box copy of every
// piece on this process's side (from its source shard for a send, into its
// target shard for a receive), and the stage's copies within the process. They depend on the plans only, not on the
// arrays' memory, so an operation over the same plans as a recent one
// (a training loop resharding the same layouts again and again) takes them
// as they were: for a model's tens of thousands of pieces, deriving them
// cost about a fifth of each batched reshard.
struct PreparedExchange {
  ProcessMessages messages;
  std::vector<std::vector<layout_detail::BoxCopy>> send_copies;     // [send][piece]
  std::vector<std::vector<layout_detail::BoxCopy>> receive_copies;  // [receive][piece]
  // The stage's copies within this process: transfer `transfer` of array
  // `array`, from shard `src_shard` (of the source array for stage 0, of the
  // target for stage 1) into shard `dst_shard` of the target.
  struct LocalCopy {
    size_t array = 0;
    size_t transfer = 0;
    layout_detail::BoxCopy copy;
    size_t src_shard = 0;
    size_t dst_shard = 0;
  };
  std::vector<LocalCopy> local;

  // The row lists of the messages for one set of arrays, made by
  // exchange_rows and kept here for the next operation on the same arrays.
  mutable std::mutex rows_mutex;
  mutable std::shared_ptr<const ExchangeRows> rows;
};

// Where a message's pieces lie on this process's side: shard `shard` of
// array `array`'s source, or of its target (`target`: what a receive writes
// and what stage 2 sends read).
struct ShardRef {
  size_t array = 0;
  size_t shard = 0;
  bool target = false;
  auto operator<=>(const ShardRef&) const = default;
};

// The shard `ref` names among the arrays of `moves`.
const Shard& shard_of(std::span<const ArrayMove> moves, const ShardRef& ref);

// The memory side of a prepared exchange: every message's runs in the
// arrays' shards, and the shards each one reads or writes. They follow from
// the plans and the shards' addresses alone, so an operation on the same
// arrays as the last one (a training loop) takes them as they were: building
// a model's row lists, piece by piece, cost several percent of each batched
// reshard between processes.
struct ExchangeRows {
  std::vector<const std::byte*> addresses;       // every move's source shards, then its target shards
  std::vector<std::vector<ConstRunRows>> sends;  // [send]: the runs it reads
  std::vector<std::vector<RunRows>> receives;    // [receive]: the runs it writes
  // [send]: the shards its pieces read, in piece order, a shard that
  // consecutive pieces share once (so front() is the first piece's, back() the last's).
  std::vector<std::vector<ShardRef>> send_shards;
  std::vector<std::vector<ShardRef>> receive_shards;  // [receive]: the same for the shards it writes
};

// The row lists of `prepared` (made by prepare_exchange over `moves`) for the
// arrays of `moves`: those kept from the last call if the arrays' shards are
// where they were, else made and kept. Thread-safe.
std::shared_ptr<const ExchangeRows> exchange_rows(std::span<const ArrayMove> moves, const PreparedExchange& prepared);

// The prepared exchange of `process` for stage `stage` of `moves` (see
// schedule_messages), from a small cache of recent ones (per process, keyed
// by the plans' keys and transfers, the message size and the stage), or made
// and kept. Thread-safe: in-process ranks run side by side.
std::shared_ptr<const PreparedExchange> prepare_exchange(std::span<const ArrayMove> moves, int process,
                                                         uint64_t message_bytes, int stage);

}  // namespace reshard::execute_detail
