// Exchange: moves one process's scheduled messages with a bound on the bytes in flight.
#pragma once

#include <deque>
#include <memory>

#include "box_copy.h"
#include "reshard/execute/buffer.h"
#include "reshard/execute/executor.h"
#include "message_schedule.h"

namespace reshard {

// Posts sends and receives in the global message order while the bytes in
// flight allow (always at least one each way), and waits on the oldest
// outstanding one. Since every process walks the same order, the oldest
// unfinished message of the whole job is always posted at both ends, so the
// exchange cannot deadlock. Strided pieces are packed into a staging buffer;
// a message that is one contiguous run is sent from, or received into, the
// shard itself.
class Exchange {
 public:
  Exchange(const Plan& plan, const ProcessMessages& messages, const ShardedArray& src, ShardedArray& dst,
           Transport& transport, Tag base, uint64_t max_bytes_in_flight);

  void run(ExecuteStats& stats);

 private:
  struct Pending {
    const Message* message = nullptr;
    Buffer staging;  // empty when the message goes straight to or from a shard
    // Declared after the staging buffer so that it ends first: a request that
    // ends early withdraws its message before the buffer is freed.
    std::unique_ptr<Request> request;
  };

  void post_sends();
  void post_receives();
  void finish_oldest(ExecuteStats& stats);
  void unpack(const Pending& pending);
  BoxCopy send_copy(const MessagePiece& piece) const;
  BoxCopy receive_copy(const MessagePiece& piece) const;

  const Plan& plan_;
  const ProcessMessages& messages_;
  const ShardedArray& src_;
  ShardedArray& dst_;
  Transport& transport_;
  const Tag base_;
  const uint64_t max_bytes_in_flight_;
  size_t next_send_ = 0;
  size_t next_receive_ = 0;
  uint64_t send_bytes_in_flight_ = 0;
  uint64_t receive_bytes_in_flight_ = 0;
  std::deque<Pending> sends_;
  std::deque<Pending> receives_;
};

}  // namespace reshard
