#include "exchange.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "layout/box_copy.h"
#include "reshard/execute/transport_calls.h"

namespace reshard::execute_detail {
namespace {

// Messages posted and not finished, each way, at most, whatever their size:
// enough for a model's worth of 8 MiB messages between the processes of a
// host to go together, few enough that a transport's round of progress,
// which looks at every pending request, stays short. Tiny messages (a
// model's biases, a small message size) fit the byte budget by the thousand.
constexpr size_t kMaxMessagesInFlight = 256;

}  // namespace

bool Exchange::InFlight::fits(uint64_t message_bytes, bool moves_in_place, uint64_t limit) const {
  if (empty()) return true;
  if (messages >= kMaxMessagesInFlight) return false;
  return moves_in_place || bytes == 0 || bytes + message_bytes <= limit;
}

bool Exchange::InFlight::half_free(uint64_t limit) const {
  return bytes <= limit / 2 && messages <= kMaxMessagesInFlight / 2;
}

void Exchange::InFlight::add(uint64_t message_bytes, bool moves_in_place) {
  ++messages;
  if (!moves_in_place) bytes += message_bytes;
}

void Exchange::InFlight::remove(uint64_t message_bytes, bool moves_in_place) {
  --messages;
  if (!moves_in_place) bytes -= message_bytes;
}

Exchange::Exchange(std::span<const ArrayMove> moves, const PreparedExchange& prepared, Transport& transport, Tag base,
                   uint64_t max_bytes_in_flight, int threads, std::vector<CopyJob> copies)
    : moves_(moves),
      messages_(prepared.messages),
      transport_(transport),
      base_(base),
      max_bytes_in_flight_(max_bytes_in_flight),
      threads_(threads),
      rows_(exchange_rows(moves, prepared)),
      copies_(std::move(copies)) {
  // By source shard, so that each batch finds the copies of its shards at once.
  std::stable_sort(copies_.begin(), copies_.end(), [](const CopyJob& a, const CopyJob& b) {
    return std::less<>()(a.src, b.src);
  });
  copy_handed_.assign(copies_.size(), false);
  send_in_place_.resize(messages_.sends.size());
  for (size_t i = 0; i < send_in_place_.size(); ++i) {
    send_in_place_[i] = sends_in_place(transport_, messages_.sends[i].dst_process, rows_->sends[i]);
  }
  receive_in_place_.resize(messages_.receives.size());
  for (size_t i = 0; i < receive_in_place_.size(); ++i) {
    receive_in_place_[i] = receives_in_place(transport_, messages_.receives[i].src_process);
  }
}

std::vector<const std::byte*> Exchange::shards_read_by(size_t first, size_t end) const {
  std::vector<const std::byte*> read;
  for (size_t i = first; i < end; ++i) {
    for (const ShardRef& ref : rows_->send_shards[i]) read.push_back(shard_of(moves_, ref).buffer.data());
  }
  std::sort(read.begin(), read.end());
  read.erase(std::unique(read.begin(), read.end()), read.end());
  return read;
}

std::vector<CopyJob> Exchange::copies_left_to_caller() {
  if (copies_.empty() || !copies_with_sends(transport_)) return std::exchange(copies_, {});
  const std::vector<const std::byte*> sent_from = shards_read_by(0, messages_.sends.size());
  std::vector<CopyJob> left;
  std::erase_if(copies_, [&](const CopyJob& job) {
    if (std::binary_search(sent_from.begin(), sent_from.end(), job.src)) return false;
    left.push_back(job);
    return true;
  });
  copy_handed_.assign(copies_.size(), false);  // what is left stays in source order
  return left;
}

size_t Exchange::end_at_shard(size_t end) const {
  if (copies_.empty() || end >= messages_.sends.size()) return end;
  for (size_t k = end; k > next_send_ + 1; --k) {
    const std::vector<ShardRef>& before = rows_->send_shards[k - 1];
    const std::vector<ShardRef>& after = rows_->send_shards[k];
    if (before.empty() || after.empty() || before.back() != after.front()) return k;
  }
  return end;
}

std::vector<LocalCopy> Exchange::take_copies(size_t first, size_t end) {
  std::vector<LocalCopy> taken;
  if (copies_.empty()) return taken;
  const auto by_source = [](const CopyJob& job, const std::byte* shard) { return std::less<>()(job.src, shard); };
  for (const std::byte* shard : shards_read_by(first, end)) {
    for (auto it = std::lower_bound(copies_.begin(), copies_.end(), shard, by_source);
         it != copies_.end() && it->src == shard; ++it) {
      const auto i = static_cast<size_t>(it - copies_.begin());
      if (copy_handed_[i]) continue;
      copy_handed_[i] = true;
      it->copy.src_rows(it->src, 0, it->copy.bytes(), copy_from_.emplace_back());
      it->copy.dst_rows(it->dst, 0, it->copy.bytes(), copy_to_.emplace_back());
      taken.push_back({copy_from_.back(), copy_to_.back()});
    }
  }
  return taken;
}

std::shared_ptr<const void> Exchange::owner_of(std::span<const ShardRef> shards) const {
  std::vector<std::shared_ptr<const void>> owners;
  owners.reserve(shards.size());
  for (const ShardRef& ref : shards) owners.push_back(shard_of(moves_, ref).buffer.owner());
  // Each owner once (a message of a whole model's pieces has hundreds).
  const auto by_address = [](const auto& a, const auto& b) { return std::less<>()(a.get(), b.get()); };
  std::sort(owners.begin(), owners.end(), by_address);
  owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  if (owners.size() == 1) return owners.front();
  // Pieces of several shards: one owner that keeps them all.
  return std::make_shared<const std::vector<std::shared_ptr<const void>>>(std::move(owners));
}

void Exchange::post_sends() {
  // Sends go in batches: once half the bound is free, as many as fit, all
  // in one call, so that a transport that gathers walks the rows they share
  // once (one at a time as each finished, every gather would walk alone).
  if (!sending_.half_free(max_bytes_in_flight_)) return;
  size_t end = next_send_;
  InFlight in_flight = sending_;
  while (end < messages_.sends.size() &&
         in_flight.fits(messages_.sends[end].bytes, send_in_place_[end], max_bytes_in_flight_)) {
    in_flight.add(messages_.sends[end].bytes, send_in_place_[end]);
    ++end;
  }
  if (end == next_send_) return;
  end = end_at_shard(end);
  std::vector<GatherSend> batch;
  batch.reserve(end - next_send_);
  for (size_t i = next_send_; i < end; ++i) {
    // The request shares the shards' owner: if the exchange fails, a
    // transport still holding the bytes keeps them alive.
    batch.push_back({messages_.sends[i].dst_process, base_ + messages_.sends[i].index, rows_->sends[i],
                     owner_of(rows_->send_shards[i])});
  }
  const std::vector<LocalCopy> copies = take_copies(next_send_, end);
  std::vector<std::unique_ptr<Request>> requests = copies.empty()
                                                      ? isend_gather_all(transport_, batch, threads_)
                                                      : isend_gather_all_with_copies(transport_, batch, threads_, copies);
  if (!copies.empty()) {
    copy_requests_.push_back(std::move(requests.back()));
    requests.pop_back();
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    const Message& m = messages_.sends[next_send_ + i];
    const bool in_place = send_in_place_[next_send_ + i];
    sending_.add(m.bytes, in_place);
    sends_.push_back(Pending{&m, std::move(requests[i]), in_place});
  }
  next_send_ = end;
}

void Exchange::post_receives() {
  while (next_receive_ < messages_.receives.size() &&
         receiving_.fits(messages_.receives[next_receive_].bytes, receive_in_place_[next_receive_],
                         max_bytes_in_flight_)) {
    const size_t index = next_receive_++;
    const Message& m = messages_.receives[index];
    Pending pending{&m, nullptr, receive_in_place_[index]};
    pending.request = irecv_scatter_rows(transport_, m.src_process, base_ + m.index, rows_->receives[index],
                                                    owner_of(rows_->receive_shards[index]));
    receiving_.add(m.bytes, pending.in_place);
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
    sending_.remove(bytes, oldest.in_place);
    stats.bytes_sent += bytes;
    ++stats.messages_sent;
  } else {
    receiving_.remove(bytes, oldest.in_place);
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
    if (sends_.empty() && receives_.empty()) break;
    finish_oldest(stats);
  }
  // Every send is done, so nothing is left to walk with: these end now.
  for (const std::unique_ptr<Request>& copies : copy_requests_) copies->wait();
}

}  // namespace reshard::execute_detail
