#include "exchange.h"

#include "box_copy.h"
#include "staging_cache.h"

namespace reshard {
namespace {

// Whether one more message of `bytes` fits: there is always room for one.
bool fits(uint64_t in_flight, uint64_t bytes, uint64_t limit) { return in_flight == 0 || in_flight + bytes <= limit; }

}  // namespace

Exchange::Exchange(std::span<const ArrayMove> moves, const ProcessMessages& messages, Transport& transport, Tag base,
                   uint64_t max_bytes_in_flight)
    : moves_(moves), messages_(messages), transport_(transport), base_(base), max_bytes_in_flight_(max_bytes_in_flight) {}

const Transfer& Exchange::transfer_of(const MessagePiece& piece) const {
  return moves_[piece.array].plan->transfers()[piece.transfer];
}

const std::byte* Exchange::src_data(const MessagePiece& piece) const {
  return moves_[piece.array].src->shard(transfer_of(piece).src).buffer.data();
}

std::byte* Exchange::dst_data(const MessagePiece& piece) const {
  return moves_[piece.array].dst->mutable_shard(transfer_of(piece).dst).buffer.data();
}

BoxCopy Exchange::send_copy(const MessagePiece& piece) const {
  const Transfer& t = transfer_of(piece);
  const ShardedArray& src = *moves_[piece.array].src;
  return BoxCopy(t.box, src.shard(t.src).box, t.box, src.element_bytes());
}

BoxCopy Exchange::receive_copy(const MessagePiece& piece) const {
  const Transfer& t = transfer_of(piece);
  const ShardedArray& dst = *moves_[piece.array].dst;
  return BoxCopy(t.box, t.box, dst.shard(t.dst).box, dst.element_bytes());
}

void Exchange::post_sends() {
  while (next_send_ < messages_.sends.size() &&
         fits(send_bytes_in_flight_, messages_.sends[next_send_].bytes, max_bytes_in_flight_)) {
    const Message& m = messages_.sends[next_send_++];
    Pending pending{&m, {}, nullptr};
    std::span<const std::byte> payload;
    const MessagePiece& first = m.pieces.front();
    if (auto offset = send_copy(first).contiguous_in_src(first.begin, first.end); offset && m.pieces.size() == 1) {
      payload = {src_data(first) + *offset, m.bytes};
    } else {
      pending.staging = StagingCache::for_process().take(m.bytes);
      for (const MessagePiece& piece : m.pieces) {
        send_copy(piece).pack(src_data(piece), piece.begin, piece.end, pending.staging.data() + piece.offset);
      }
      payload = pending.staging.bytes();
    }
    pending.request = transport_.isend(m.dst_process, base_ + m.index, payload);
    send_bytes_in_flight_ += m.bytes;
    sends_.push_back(std::move(pending));
  }
}

void Exchange::post_receives() {
  while (next_receive_ < messages_.receives.size() &&
         fits(receive_bytes_in_flight_, messages_.receives[next_receive_].bytes, max_bytes_in_flight_)) {
    const Message& m = messages_.receives[next_receive_++];
    Pending pending{&m, {}, nullptr};
    std::span<std::byte> target;
    const MessagePiece& first = m.pieces.front();
    if (auto offset = receive_copy(first).contiguous_in_dst(first.begin, first.end); offset && m.pieces.size() == 1) {
      target = {dst_data(first) + *offset, m.bytes};
    } else {
      pending.staging = StagingCache::for_process().take(m.bytes);
      target = pending.staging.bytes();
    }
    pending.request = transport_.irecv(m.src_process, base_ + m.index, target);
    receive_bytes_in_flight_ += m.bytes;
    receives_.push_back(std::move(pending));
  }
}

void Exchange::unpack(const Pending& pending) {
  for (const MessagePiece& piece : pending.message->pieces) {
    receive_copy(piece).unpack(pending.staging.data() + piece.offset, piece.begin, piece.end, dst_data(piece));
  }
}

void Exchange::finish_oldest(ExecuteStats& stats) {
  const int processes = transport_.size();
  const bool send_first =
      receives_.empty() ||
      (!sends_.empty() && sends_.front().message->comes_before(*receives_.front().message, processes));
  std::deque<Pending>& queue = send_first ? sends_ : receives_;
  Pending& oldest = queue.front();
  oldest.request->wait();
  const uint64_t bytes = oldest.message->bytes;
  if (send_first) {
    send_bytes_in_flight_ -= bytes;
    stats.bytes_sent += bytes;
    ++stats.messages_sent;
  } else {
    if (oldest.staging.size() > 0) unpack(oldest);
    receive_bytes_in_flight_ -= bytes;
    stats.bytes_received += bytes;
    ++stats.messages_received;
  }
  StagingCache::for_process().give_back(std::move(oldest.staging));
  queue.pop_front();
}

void Exchange::run(ExecuteStats& stats) {
  while (true) {
    post_sends();
    post_receives();
    if (sends_.empty() && receives_.empty()) return;
    finish_oldest(stats);
  }
}

}  // namespace reshard
