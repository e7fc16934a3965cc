#include "message_schedule.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "layout/checked.h"
#include "reshard/execute/sharded_array.h"
#include "reshard/layout/error.h"

namespace reshard::execute_detail {

using layout_detail::checked_add;
using layout_detail::checked_mul;

namespace {

// One transfer of the batch that crosses processes.
struct TransferRef {
  size_t array = 0;
  size_t transfer = 0;
  uint64_t bytes = 0;
  DeviceId src = 0;
};

// The transfers from one process to another: plan by plan, each plan's by
// source device (else in the plan's order). Every pair then streams one
// source shard's transfers at a time, so the messages of one round to
// different peers come from the same shard, whose rows a transport that
// gathers the round together reads once.
using PairTransfers = std::map<std::pair<int, int>, std::vector<TransferRef>>;

PairTransfers cross_process_transfers(std::span<const Plan* const> plans, int process, int stage) {
  PairTransfers pairs;
  for (size_t a = 0; a < plans.size(); ++a) {
    const Topology& topology = plans[a]->key().topology;
    const size_t element_bytes = whole_element_bytes(plans[a]->key().dtype);
    const auto& transfers = plans[a]->transfers();
    for (size_t i = 0; i < transfers.size(); ++i) {
      if (transfers[i].stage != stage) continue;
      const int src = topology.process_of(transfers[i].src);
      const int dst = topology.process_of(transfers[i].dst);
      if (src == dst || (src != process && dst != process)) continue;
      const uint64_t bytes =
          checked_mul(static_cast<uint64_t>(transfers[i].box.volume()), element_bytes, "transfer bytes");
      pairs[{src, dst}].push_back(TransferRef{a, i, bytes, transfers[i].src});
    }
  }
  for (auto& [pair, refs] : pairs) {
    std::stable_sort(refs.begin(), refs.end(), [](const TransferRef& x, const TransferRef& y) {
      return std::pair(x.array, x.src) < std::pair(y.array, y.src);
    });
  }
  return pairs;
}

// Streams the pair's transfers into messages of at most `most` bytes.
std::vector<Message> cut_into_messages(int src, int dst, const std::vector<TransferRef>& transfers, uint64_t most) {
  std::vector<Message> messages;
  Message current{src, dst, 0, 0, {}};
  for (const TransferRef& t : transfers) {
    for (uint64_t pos = 0; pos < t.bytes;) {
      const uint64_t take = std::min(t.bytes - pos, most - current.bytes);
      current.pieces.push_back(MessagePiece{t.array, t.transfer, pos, pos + take, current.bytes});
      current.bytes += take;
      pos += take;
      if (current.bytes == most) {
        messages.push_back(std::move(current));
        current = Message{src, dst, messages.size(), 0, {}};
      }
    }
  }
  if (current.bytes > 0) messages.push_back(std::move(current));
  return messages;
}

}  // namespace

bool Message::comes_before(const Message& other, int num_processes) const {
  const auto key = [num_processes](const Message& m) {
    return std::tuple(m.index, (m.dst_process - m.src_process + num_processes) % num_processes, m.src_process);
  };
  return key(*this) < key(other);
}

ProcessMessages schedule_messages(std::span<const Plan* const> plans, int process, uint64_t message_bytes, int stage) {
  if (message_bytes == 0) throw Error(ErrorCode::kInvalidArgument, "the message size must be at least 1 byte");
  ProcessMessages out;
  int processes = 1;
  for (const Plan* plan : plans) processes = std::max(processes, plan->key().topology.num_processes());
  for (const auto& [pair, transfers] : cross_process_transfers(plans, process, stage)) {
    uint64_t pair_bytes = 0;
    for (const TransferRef& t : transfers) pair_bytes = checked_add(pair_bytes, t.bytes, "bytes between two processes");
    // Tags within one operation are limited; grow the messages rather than run out.
    const uint64_t most = std::max(message_bytes, pair_bytes / Transport::kTagsPerOperation + 1);
    auto messages = cut_into_messages(pair.first, pair.second, transfers, most);
    auto& list = pair.first == process ? out.sends : out.receives;
    list.insert(list.end(), std::make_move_iterator(messages.begin()), std::make_move_iterator(messages.end()));
  }
  const auto in_order = [processes](const Message& a, const Message& b) { return a.comes_before(b, processes); };
  std::sort(out.sends.begin(), out.sends.end(), in_order);
  std::sort(out.receives.begin(), out.receives.end(), in_order);
  return out;
}

ProcessMessages schedule_messages(const Plan& plan, int process, uint64_t message_bytes) {
  const Plan* one = &plan;
  return schedule_messages(std::span<const Plan* const>(&one, 1), process, message_bytes);
}

}  // namespace reshard::execute_detail
