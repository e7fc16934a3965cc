#include "prepared_exchange.h"

#include <algorithm>
#include <list>
#include <mutex>
#include <utility>

namespace reshard::execute_detail {

using layout_detail::BoxCopy;

namespace {

// What a prepared exchange was made from. Equal keys and equal digests
// (which cover the transfers) make equal plans, and the arrays' shard boxes
// follow from the keys.
struct PreparedKey {
  std::vector<PlanKey> plans;
  std::vector<uint64_t> digests;
  int process = 0;
  uint64_t message_bytes = 0;
  int stage = 0;

  bool matches(std::span<const ArrayMove> moves, int p, uint64_t bytes, int s) const {
    if (process != p || message_bytes != bytes || stage != s || plans.size() != moves.size()) return false;
    for (size_t i = 0; i < moves.size(); ++i) {
      if (digests[i] != moves[i].plan->digest() || !(plans[i] == moves[i].plan->key())) return false;
    }
    return true;
  }
};

// Enough for every in-process rank of a job moving a batch both ways.
constexpr size_t kKeptExchanges = 16;

class PreparedCache {
 public:
  static PreparedCache& instance() {
    static PreparedCache cache;
    return cache;
  }

  std::shared_ptr<const PreparedExchange> find(std::span<const ArrayMove> moves, int process, uint64_t bytes,
                                               int stage) {
    std::lock_guard guard(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (!it->first.matches(moves, process, bytes, stage)) continue;
      entries_.splice(entries_.begin(), entries_, it);  // most recent first
      return entries_.front().second;
    }
    return nullptr;
  }

  void keep(PreparedKey key, std::shared_ptr<const PreparedExchange> prepared) {
    std::lock_guard guard(mutex_);
    entries_.emplace_front(std::move(key), std::move(prepared));
    if (entries_.size() > kKeptExchanges) entries_.pop_back();
  }

 private:
  std::mutex mutex_;
  std::list<std::pair<PreparedKey, std::shared_ptr<const PreparedExchange>>> entries_;
};

const Transfer& transfer_of(std::span<const ArrayMove> moves, const MessagePiece& piece) {
  return moves[piece.array].plan->transfers()[piece.transfer];
}

// Stage 0 reads the source arrays; stage 2 the target shards stages 0 and 1 filled.
const ShardedArray& source_of(std::span<const ArrayMove> moves, const MessagePiece& piece) {
  const ArrayMove& move = moves[piece.array];
  return transfer_of(moves, piece).stage == 0 ? *move.src : *move.dst;
}

BoxCopy send_copy(std::span<const ArrayMove> moves, const MessagePiece& piece) {
  const Transfer& t = transfer_of(moves, piece);
  const ShardedArray& src = source_of(moves, piece);
  return BoxCopy(t.box, src.shard(t.src).box, t.box, src.element_bytes());
}

BoxCopy receive_copy(std::span<const ArrayMove> moves, const MessagePiece& piece) {
  const Transfer& t = transfer_of(moves, piece);
  const ShardedArray& dst = *moves[piece.array].dst;
  return BoxCopy(t.box, t.box, dst.shard(t.dst).box, dst.element_bytes());
}

template <typename CopyOf>
std::vector<std::vector<BoxCopy>> copies_of(const std::vector<Message>& messages, CopyOf&& copy_of) {
  std::vector<std::vector<BoxCopy>> copies(messages.size());
  for (size_t m = 0; m < messages.size(); ++m) {
    copies[m].reserve(messages[m].pieces.size());
    for (const MessagePiece& piece : messages[m].pieces) copies[m].push_back(copy_of(piece));
  }
  return copies;
}

// The index of `device`'s shard in `array` (Error(kUnknownDevice) if it holds none).
size_t shard_index(const ShardedArray& array, DeviceId device) {
  return static_cast<size_t>(&array.shard(device) - array.shards().data());
}

// Stage 0 reads the source arrays; stage 1 reads target shards that stage 0
// filled (stage 2 crosses processes: it has none).
std::vector<PreparedExchange::LocalCopy> local_copies(std::span<const ArrayMove> moves, int process, int stage) {
  std::vector<PreparedExchange::LocalCopy> copies;
  for (size_t a = 0; a < moves.size(); ++a) {
    const ArrayMove& move = moves[a];
    const Topology& topology = move.plan->key().topology;
    const ShardedArray& from_array = stage == 0 ? *move.src : *move.dst;
    const auto& transfers = move.plan->transfers();
    for (size_t i = 0; i < transfers.size(); ++i) {
      const Transfer& t = transfers[i];
      if (t.stage != stage) continue;
      if (topology.process_of(t.src) != process || topology.process_of(t.dst) != process) continue;
      const size_t src_shard = shard_index(from_array, t.src), dst_shard = shard_index(*move.dst, t.dst);
      copies.push_back({a, i,
                        BoxCopy(t.box, from_array.shards()[src_shard].box, move.dst->shards()[dst_shard].box,
                                move.dst->element_bytes()),
                        src_shard, dst_shard});
    }
  }
  return copies;
}

// Every move's source shards' addresses, then its target shards'.
std::vector<const std::byte*> shard_addresses(std::span<const ArrayMove> moves) {
  std::vector<const std::byte*> addresses;
  for (const ArrayMove& move : moves) {
    for (const Shard& shard : move.src->shards()) addresses.push_back(shard.buffer.data());
  }
  for (const ArrayMove& move : moves) {
    for (const Shard& shard : move.dst->shards()) addresses.push_back(shard.buffer.data());
  }
  return addresses;
}

// The shard a send's piece reads (source_of's), by index.
ShardRef send_shard(std::span<const ArrayMove> moves, const MessagePiece& piece) {
  const ShardedArray& from = source_of(moves, piece);
  return {piece.array, shard_index(from, transfer_of(moves, piece).src), &from == moves[piece.array].dst};
}

// The target shard a receive's piece writes, by index.
ShardRef receive_shard(std::span<const ArrayMove> moves, const MessagePiece& piece) {
  return {piece.array, shard_index(*moves[piece.array].dst, transfer_of(moves, piece).dst), true};
}

// Appends `ref` unless the last one is the same shard (consecutive pieces mostly are).
void add_shard(std::vector<ShardRef>& shards, const ShardRef& ref) {
  if (shards.empty() || shards.back() != ref) shards.push_back(ref);
}

std::shared_ptr<const ExchangeRows> make_rows(std::span<const ArrayMove> moves, const PreparedExchange& prepared,
                                              std::vector<const std::byte*> addresses) {
  auto rows = std::make_shared<ExchangeRows>();
  rows->addresses = std::move(addresses);
  const std::vector<Message>& sends = prepared.messages.sends;
  rows->sends.resize(sends.size());
  rows->send_shards.resize(sends.size());
  for (size_t m = 0; m < sends.size(); ++m) {
    for (size_t p = 0; p < sends[m].pieces.size(); ++p) {
      const MessagePiece& piece = sends[m].pieces[p];
      const ShardRef ref = send_shard(moves, piece);
      prepared.send_copies[m][p].src_rows(shard_of(moves, ref).buffer.data(), piece.begin, piece.end, rows->sends[m]);
      add_shard(rows->send_shards[m], ref);
    }
  }
  const std::vector<Message>& receives = prepared.messages.receives;
  rows->receives.resize(receives.size());
  rows->receive_shards.resize(receives.size());
  for (size_t m = 0; m < receives.size(); ++m) {
    for (size_t p = 0; p < receives[m].pieces.size(); ++p) {
      const MessagePiece& piece = receives[m].pieces[p];
      const ShardRef ref = receive_shard(moves, piece);
      prepared.receive_copies[m][p].dst_rows(moves[piece.array].dst->writable_bytes(ref.shard).data(), piece.begin,
                                             piece.end, rows->receives[m]);
      add_shard(rows->receive_shards[m], ref);
    }
  }
  return rows;
}

}  // namespace

const Shard& shard_of(std::span<const ArrayMove> moves, const ShardRef& ref) {
  const ArrayMove& move = moves[ref.array];
  return (ref.target ? *move.dst : *move.src).shards()[ref.shard];
}

std::shared_ptr<const ExchangeRows> exchange_rows(std::span<const ArrayMove> moves, const PreparedExchange& prepared) {
  std::vector<const std::byte*> addresses = shard_addresses(moves);
  {
    std::lock_guard guard(prepared.rows_mutex);
    if (prepared.rows && prepared.rows->addresses == addresses) return prepared.rows;
  }
  std::shared_ptr<const ExchangeRows> rows = make_rows(moves, prepared, std::move(addresses));
  std::lock_guard guard(prepared.rows_mutex);
  prepared.rows = rows;
  return rows;
}

std::shared_ptr<const PreparedExchange> prepare_exchange(std::span<const ArrayMove> moves, int process,
                                                         uint64_t message_bytes, int stage) {
  PreparedCache& cache = PreparedCache::instance();
  if (auto found = cache.find(moves, process, message_bytes, stage)) return found;
  std::vector<const Plan*> plans;
  PreparedKey key{{}, {}, process, message_bytes, stage};
  for (const ArrayMove& move : moves) {
    plans.push_back(move.plan);
    key.plans.push_back(move.plan->key());
    key.digests.push_back(move.plan->digest());
  }
  auto prepared = std::make_shared<PreparedExchange>();
  prepared->messages = schedule_messages(plans, process, message_bytes, stage);
  prepared->send_copies =
      copies_of(prepared->messages.sends, [&](const MessagePiece& piece) { return send_copy(moves, piece); });
  prepared->receive_copies =
      copies_of(prepared->messages.receives, [&](const MessagePiece& piece) { return receive_copy(moves, piece); });
  prepared->local = local_copies(moves, process, stage);
  cache.keep(std::move(key), prepared);
  return prepared;
}

}  // namespace reshard::execute_detail
