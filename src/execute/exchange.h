// Exchange: moves one process's scheduled messages (of one array or a batch) with a bound on the bytes in flight.
#pragma once

#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "array_move.h"
#include "layout/box_copy.h"
#include "reshard/execute/buffer.h"
#include "reshard/execute/executor.h"
#include "reshard/execute/fast_paths.h"
#include "message_schedule.h"
#include "prepared_exchange.h"
#include "parallel_copy.h"

namespace reshard::execute_detail {

// Posts sends and receives in the global message order while the bytes in
// flight allow (always at least one each way), and waits on the oldest
// outstanding one. Since every process walks the same order, the oldest
// unfinished message of the whole job is always posted at both ends, so the
// exchange cannot deadlock (sends go in batches, once half the bound is free,
// but a process with none in flight always posts). A message that is one
// contiguous run is sent from, or received into, the shard itself; one of
// several runs (strided pieces, several transfers) goes through the
// transport's gather and scatter: between processes of a host, one kernel
// copy (a batch's gathers walked together); otherwise derived datatypes or
// packing.
//
// The bound on bytes in flight bounds the memory the transport holds for
// messages (staging buffers). A message the transport moves in place
// (sends_in_place, receives_in_place of transport_calls.h: between processes of a
// host, straight from rows to rows) holds none, so it does not count.
// Posting those together lets the transport walk a source shard once for all
// the peers its rows go to, where batches cut by the bound walked it once
// per batch. Every message, in place or not, also counts against a bound on
// the number in flight each way (kMaxMessagesInFlight): a transport's round
// of progress looks at each pending request.
class Exchange {
 public:
  // `prepared` comes from prepare_exchange over `moves` (its messages, in order).
  // A transport that gathers sends may use `threads` threads for it.
  // `copies` within this process (stage 0's) go with the send batches that
  // read the same source shards where the transport makes such copies
  // itself (copies_with_sends, transport_calls.h); the rest are the caller's.
  Exchange(std::span<const ArrayMove> moves, const PreparedExchange& prepared, Transport& transport, Tag base,
           uint64_t max_bytes_in_flight, int threads = 1, std::vector<CopyJob> copies = {});

  // The copies the caller makes itself: those no send reads the source of
  // (or all, where the transport does not take copies). Call before run().
  std::vector<CopyJob> copies_left_to_caller();

  // Moves the messages, and makes the copies it took.
  void run(ExecuteStats& stats);

 private:
  struct Pending {
    const Message* message = nullptr;
    std::unique_ptr<Request> request;
    bool in_place = false;
  };

  // What one direction has posted and not finished.
  struct InFlight {
    uint64_t bytes = 0;   // of messages that hold the transport's memory
    size_t messages = 0;  // all of them, those moving in place too
    bool empty() const { return messages == 0; }
    // Whether a message of `bytes` (moving in place or not) fits beside
    // these under `limit`: one always does when nothing is in flight.
    bool fits(uint64_t message_bytes, bool moves_in_place, uint64_t limit) const;
    // Whether at least half of both budgets is free: when a batch of sends starts.
    bool half_free(uint64_t limit) const;
    void add(uint64_t message_bytes, bool moves_in_place);
    void remove(uint64_t message_bytes, bool moves_in_place);
  };

  void post_sends();
  // Where the batch of sends [next_send_, end) ends: before `end`, at the
  // last change of source shard, when copies go with the batches (so that
  // a shard's sends and its copies walk its rows together).
  size_t end_at_shard(size_t end) const;
  // The copies that read the shards the sends [first, end) read, not yet
  // handed over, as the transport takes them.
  std::vector<LocalCopy> take_copies(size_t first, size_t end);
  // The source shards the sends [first, end) read, each once, in address order.
  std::vector<const std::byte*> shards_read_by(size_t first, size_t end) const;
  void post_receives();
  void finish_oldest(ExecuteStats& stats);
  // What keeps the memory of a message's shards alive (their owners).
  std::shared_ptr<const void> owner_of(std::span<const ShardRef> shards) const;

  std::span<const ArrayMove> moves_;
  const ProcessMessages& messages_;
  Transport& transport_;
  const Tag base_;
  const uint64_t max_bytes_in_flight_;
  const int threads_;
  const std::shared_ptr<const ExchangeRows> rows_;  // the messages' runs in this operation's arrays
  // Which messages the transport moves in place ([send], [receive]).
  std::vector<bool> send_in_place_;
  std::vector<bool> receive_in_place_;
  size_t next_send_ = 0;
  size_t next_receive_ = 0;
  InFlight sending_;
  InFlight receiving_;
  std::deque<Pending> sends_;
  std::deque<Pending> receives_;
  // Copies made with the sends (in source shard order), each handed over
  // once (with the first batch that reads its source shard), their rows kept
  // until their request ends.
  std::vector<CopyJob> copies_;
  std::vector<bool> copy_handed_;
  std::deque<std::vector<ConstRunRows>> copy_from_;
  std::deque<std::vector<RunRows>> copy_to_;
  std::vector<std::unique_ptr<Request>> copy_requests_;
};

}  // namespace reshard::execute_detail
