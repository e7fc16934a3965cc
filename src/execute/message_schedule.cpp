#include "message_schedule.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "reshard/execute/sharded_array.h"
#include "reshard/layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

// The transfers from one process to another, in plan order.
using PairTransfers = std::map<std::pair<int, int>, std::vector<size_t>>;

PairTransfers cross_process_transfers(const Plan& plan, int process) {
  const Topology& topology = plan.key().topology;
  PairTransfers pairs;
  const auto& transfers = plan.transfers();
  for (size_t i = 0; i < transfers.size(); ++i) {
    const int src = topology.process_of(transfers[i].src);
    const int dst = topology.process_of(transfers[i].dst);
    if (src != dst && (src == process || dst == process)) pairs[{src, dst}].push_back(i);
  }
  return pairs;
}

// Streams the pair's transfers into messages of at most `chunk` bytes.
std::vector<Message> cut_into_messages(int src, int dst, const std::vector<size_t>& transfer_ids,
                                       const std::vector<uint64_t>& transfer_bytes, uint64_t chunk) {
  std::vector<Message> messages;
  Message current{src, dst, 0, 0, {}};
  for (size_t id : transfer_ids) {
    for (uint64_t pos = 0; pos < transfer_bytes[id];) {
      const uint64_t take = std::min(transfer_bytes[id] - pos, chunk - current.bytes);
      current.pieces.push_back(MessagePiece{id, pos, pos + take, current.bytes});
      current.bytes += take;
      pos += take;
      if (current.bytes == chunk) {
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

ProcessMessages schedule_messages(const Plan& plan, int process, uint64_t chunk_bytes) {
  if (chunk_bytes == 0) throw Error(ErrorCode::kInvalidArgument, "the message chunk size must be at least 1 byte");
  const size_t element_bytes = whole_element_bytes(plan.key().dtype);
  std::vector<uint64_t> transfer_bytes;
  transfer_bytes.reserve(plan.transfers().size());
  for (const Transfer& t : plan.transfers()) {
    transfer_bytes.push_back(checked_mul(static_cast<uint64_t>(t.box.volume()), element_bytes, "transfer bytes"));
  }
  ProcessMessages out;
  for (const auto& [pair, ids] : cross_process_transfers(plan, process)) {
    uint64_t pair_bytes = 0;
    for (size_t id : ids) pair_bytes = checked_add(pair_bytes, transfer_bytes[id], "bytes between two processes");
    // Tags within one operation are limited; grow the chunk rather than run out.
    const uint64_t chunk = std::max(chunk_bytes, pair_bytes / Transport::kTagsPerOperation + 1);
    auto messages = cut_into_messages(pair.first, pair.second, ids, transfer_bytes, chunk);
    auto& list = pair.first == process ? out.sends : out.receives;
    list.insert(list.end(), std::make_move_iterator(messages.begin()), std::make_move_iterator(messages.end()));
  }
  const int processes = plan.key().topology.num_processes();
  const auto in_order = [processes](const Message& a, const Message& b) { return a.comes_before(b, processes); };
  std::sort(out.sends.begin(), out.sends.end(), in_order);
  std::sort(out.receives.begin(), out.receives.end(), in_order);
  return out;
}

}  // namespace reshard
