#include "exchange.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "layout/box_copy.h"

namespace reshard {
namespace {

// Whether one more message of `bytes` fits: there is always room for one.
bool fits(uint64_t in_flight, uint64_t bytes, uint64_t limit) { return in_flight == 0 || in_flight + bytes <= limit; }

}  // namespace

Exchange::Exchange(std::span<const ArrayMove> moves, const ProcessMessages& messages, Transport& transport, Tag base,
                   uint64_t max_bytes_in_flight, int threads)
    : moves_(moves),
      messages_(messages),
      transport_(transport),
      base_(base),
      max_bytes_in_flight_(max_bytes_in_flight),
      threads_(threads) {}

const Transfer& Exchange::transfer_of(const MessagePiece& piece) const {
  return moves_[piece.array].plan->transfers()[piece.transfer];
}

const ShardedArray& Exchange::source_of(const MessagePiece& piece) const {
  // Stage 0 reads the source arrays; stage 2 the target shards stages 0 and 1 filled.
  const ArrayMove& move = moves_[piece.array];
  return transfer_of(piece).stage == 0 ? *move.src : *move.dst;
}

const std::byte* Exchange::src_data(const MessagePiece& piece) const {
  return source_of(piece).shard(transfer_of(piece).src).buffer.data();
}

std::byte* Exchange::dst_data(const MessagePiece& piece) const {
  return moves_[piece.array].dst->writable_bytes_of(transfer_of(piece).dst).data();
}

std::shared_ptr<const void> Exchange::owner_of(const Message& m, bool sending) const {
  std::vector<std::shared_ptr<const void>> owners;
  for (const MessagePiece& piece : m.pieces) {
    const Transfer& t = transfer_of(piece);
    const ArrayMove& move = moves_[piece.array];
    const std::shared_ptr<const void>& owner =
        sending ? source_of(piece).shard(t.src).buffer.owner() : move.dst->shard(t.dst).buffer.owner();
    if (std::find(owners.begin(), owners.end(), owner) == owners.end()) owners.push_back(owner);
  }
  if (owners.size() == 1) return owners.front();
  // Pieces of several shards: one owner that keeps them all.
  return std::make_shared<const std::vector<std::shared_ptr<const void>>>(std::move(owners));
}

BoxCopy Exchange::send_copy(const MessagePiece& piece) const {
  const Transfer& t = transfer_of(piece);
  const ShardedArray& src = source_of(piece);
  return BoxCopy(t.box, src.shard(t.src).box, t.box, src.element_bytes());
}

BoxCopy Exchange::receive_copy(const MessagePiece& piece) const {
  const Transfer& t = transfer_of(piece);
  const ShardedArray& dst = *moves_[piece.array].dst;
  return BoxCopy(t.box, t.box, dst.shard(t.dst).box, dst.element_bytes());
}

void Exchange::post_sends() {
  // Sends go in batches: once half the bound is free, as many as fit, all
  // in one call, so that a transport that gathers walks the rows they share
  // once (one at a time as each finished, every gather would walk alone).
  if (send_bytes_in_flight_ > max_bytes_in_flight_ / 2) return;
  size_t end = next_send_;
  uint64_t in_flight = send_bytes_in_flight_;
  while (end < messages_.sends.size() && fits(in_flight, messages_.sends[end].bytes, max_bytes_in_flight_)) {
    in_flight += messages_.sends[end++].bytes;
  }
  if (end == next_send_) return;
  std::vector<std::vector<ConstRunRows>> rows(end - next_send_);
  std::vector<Transport::GatherSend> batch;
  batch.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Message& m = messages_.sends[next_send_ + i];
    for (const MessagePiece& piece : m.pieces) {
      send_copy(piece).src_rows(src_data(piece), piece.begin, piece.end, rows[i]);
    }
    // The request shares the shards' owner: if the exchange fails, a
    // transport still holding the bytes keeps them alive.
    batch.push_back({m.dst_process, base_ + m.index, rows[i], owner_of(m, /*sending=*/true)});
  }
  std::vector<std::unique_ptr<Request>> requests = transport_.isend_gather_all(batch, threads_);
  for (size_t i = 0; i < requests.size(); ++i) {
    const Message& m = messages_.sends[next_send_ + i];
    send_bytes_in_flight_ += m.bytes;
    sends_.push_back(Pending{&m, std::move(requests[i])});
  }
  next_send_ = end;
}

void Exchange::post_receives() {
  while (next_receive_ < messages_.receives.size() &&
         fits(receive_bytes_in_flight_, messages_.receives[next_receive_].bytes, max_bytes_in_flight_)) {
    const Message& m = messages_.receives[next_receive_++];
    std::vector<RunRows> rows;
    for (const MessagePiece& piece : m.pieces) {
      receive_copy(piece).dst_rows(dst_data(piece), piece.begin, piece.end, rows);
    }
    Pending pending{&m, nullptr};
    pending.request =
        transport_.irecv_scatter_rows(m.src_process, base_ + m.index, rows, owner_of(m, /*sending=*/false));
    receive_bytes_in_flight_ += m.bytes;
    receives_.push_back(std::move(pending));
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
    receive_bytes_in_flight_ -= bytes;
    stats.bytes_received += bytes;
    ++stats.messages_received;
  }
  // The request goes first: a staging buffer of the transport's (gather,
  // scatter) goes back to its cache only once nothing else holds it.
  oldest.request.reset();
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
