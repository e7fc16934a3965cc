#include "exchange.h"

#include <utility>

#include "box_copy.h"
#include "staging_cache.h"

namespace reshard {
namespace {

// Whether one more message of `bytes` fits: there is always room for one.
bool fits(uint64_t in_flight, uint64_t bytes, uint64_t limit) { return in_flight == 0 || in_flight + bytes <= limit; }

}  // namespace

Exchange::Exchange(const Plan& plan, const ProcessMessages& messages, const ShardedArray& src, ShardedArray& dst,
                   Transport& transport, Tag base, uint64_t max_bytes_in_flight)
    : plan_(plan),
      messages_(messages),
      src_(src),
      dst_(dst),
      transport_(transport),
      base_(base),
      max_bytes_in_flight_(max_bytes_in_flight) {}

BoxCopy Exchange::send_copy(const MessagePiece& piece) const {
  const Transfer& t = plan_.transfers()[piece.transfer];
  return BoxCopy(t.box, src_.shard(t.src).box, t.box, src_.element_bytes());
}

BoxCopy Exchange::receive_copy(const MessagePiece& piece) const {
  const Transfer& t = plan_.transfers()[piece.transfer];
  return BoxCopy(t.box, t.box, dst_.shard(t.dst).box, dst_.element_bytes());
}

void Exchange::post_sends() {
  while (next_send_ < messages_.sends.size() &&
         fits(send_bytes_in_flight_, messages_.sends[next_send_].bytes, max_bytes_in_flight_)) {
    const Message& m = messages_.sends[next_send_++];
    Pending pending{&m, {}, nullptr};
    std::span<const std::byte> payload;
    const MessagePiece& first = m.pieces.front();
    const Buffer& shard_buffer = src_.shard(plan_.transfers()[first.transfer].src).buffer;
    const std::byte* shard = shard_buffer.data();
    std::shared_ptr<const void> owner = shard_buffer.owner();
    if (auto offset = send_copy(first).contiguous_in_src(first.begin, first.end); offset && m.pieces.size() == 1) {
      payload = {shard + *offset, m.bytes};
    } else {
      pending.staging = StagingCache::for_process().take(m.bytes);
      for (const MessagePiece& piece : m.pieces) {
        const std::byte* data = src_.shard(plan_.transfers()[piece.transfer].src).buffer.data();
        send_copy(piece).pack(data, piece.begin, piece.end, pending.staging.data() + piece.offset);
      }
      payload = std::as_const(pending.staging).bytes();
      owner = pending.staging.owner();
    }
    // The request shares the memory's owner: if the exchange fails, a
    // transport still holding the bytes keeps them alive.
    pending.request = transport_.isend_owned(m.dst_process, base_ + m.index, payload, std::move(owner));
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
    Buffer& shard_buffer = dst_.mutable_shard(plan_.transfers()[first.transfer].dst).buffer;
    std::byte* shard = shard_buffer.data();
    std::shared_ptr<const void> owner = shard_buffer.owner();
    if (auto offset = receive_copy(first).contiguous_in_dst(first.begin, first.end); offset && m.pieces.size() == 1) {
      target = {shard + *offset, m.bytes};
    } else {
      pending.staging = StagingCache::for_process().take(m.bytes);
      target = pending.staging.bytes();
      owner = pending.staging.owner();
    }
    pending.request = transport_.irecv_owned(m.src_process, base_ + m.index, target, std::move(owner));
    receive_bytes_in_flight_ += m.bytes;
    receives_.push_back(std::move(pending));
  }
}

void Exchange::unpack(const Pending& pending) {
  for (const MessagePiece& piece : pending.message->pieces) {
    std::byte* data = dst_.mutable_shard(plan_.transfers()[piece.transfer].dst).buffer.data();
    receive_copy(piece).unpack(pending.staging.data() + piece.offset, piece.begin, piece.end, data);
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
  // The request goes first: a staging buffer is reused only once nothing
  // else holds it.
  oldest.request.reset();
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
