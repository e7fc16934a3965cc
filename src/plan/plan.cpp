#include "reshard/plan/plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard {

using layout_detail::checked_add;

namespace {

int owner_of(const Topology& topology, DeviceId device, size_t transfer) {
  if (!topology.contains(device)) {
    throw Error(ErrorCode::kInvalidPlan,
                fmt::format("invalid plan: transfer {} names device {}, which is not in the job "
                            "(devices are 0..{})",
                            transfer, device, topology.num_devices() - 1));
  }
  return topology.process_of(device);
}

// dtype_byte_size(dtype, box.volume()), with the same overflow checks made
// inline: this runs for every transfer of every plan, and the two calls (and
// the one per dimension inside volume()) cost more than the rest of the
// stats. An overflow or a sub-byte type goes through them for their errors.
class ByteCounter {
 public:
  explicit ByteCounter(DType dtype) : dtype_(dtype), bits_(static_cast<uint64_t>(dtype_bits(dtype))) {}

  uint64_t operator()(const Box& box) const {
    int64_t elements = 1;
    bool overflow = false;
    for (int64_t extent : box.shape()) overflow |= __builtin_mul_overflow(elements, extent, &elements);
    uint64_t bits = 0;
    overflow = overflow || __builtin_mul_overflow(static_cast<uint64_t>(elements), bits_, &bits);
    if (overflow || bits % 8 != 0) return dtype_byte_size(dtype_, static_cast<uint64_t>(box.volume()));
    return bits / 8;
  }

 private:
  DType dtype_;
  uint64_t bits_;  // per element
};

PlanStats compute_stats(const PlanKey& key, const std::vector<Transfer>& transfers) {
  PlanStats stats;
  std::vector<uint64_t> sent(static_cast<size_t>(key.topology.num_processes()), 0);
  const ByteCounter bytes_of(key.dtype);
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& t = transfers[i];
    const uint64_t bytes = bytes_of(t.box);
    const int src_process = owner_of(key.topology, t.src, i);
    const int dst_process = owner_of(key.topology, t.dst, i);
    stats.bytes_total = checked_add(stats.bytes_total, bytes, "plan bytes");
    if (t.stage == 2) {
      stats.bytes_host_relay += bytes;
    } else if (t.stage != 0) {
      stats.bytes_fan_out += bytes;  // validate() rejects stages other than 0, 1 and 2
    } else if (t.src == t.dst) {
      stats.bytes_same_device += bytes;
    } else if (src_process == dst_process) {
      stats.bytes_same_process += bytes;
    } else {
      stats.bytes_cross_process += bytes;
      if (key.topology.host_of_process(src_process) != key.topology.host_of_process(dst_process)) {
        stats.bytes_cross_host += bytes;
      }
      uint64_t& by_sender = sent[static_cast<size_t>(src_process)];
      by_sender += bytes;
      stats.max_process_send_bytes = std::max(stats.max_process_send_bytes, by_sender);
    }
  }
  return stats;
}

// A word at a time (a multiply and a shift each): plans of 100,000
// transfers are hashed in well under a millisecond.
class WordHash {
 public:
  void add(uint64_t value) {
    hash_ = (hash_ ^ value) * 0x9e3779b97f4a7c15ULL;
    hash_ ^= hash_ >> 29;
  }
  void add(const std::vector<int64_t>& values) {
    add(values.size());
    for (int64_t v : values) add(static_cast<uint64_t>(v));
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

uint64_t digest_of(const PlanKey& key, const std::vector<Transfer>& transfers) {
  WordHash h;
  h.add(key.shape);
  h.add(static_cast<uint64_t>(key.dtype));
  h.add(transfers.size());
  for (const Transfer& t : transfers) {
    h.add(static_cast<uint64_t>(t.src));
    h.add(static_cast<uint64_t>(t.dst));
    h.add(static_cast<uint64_t>(t.stage));
    h.add(t.box.origin());
    h.add(t.box.shape());
  }
  return h.value();
}

}  // namespace

Plan::Plan(PlanKey key, std::vector<Transfer> transfers)
    : key_(std::move(key)),
      transfers_(std::move(transfers)),
      stats_(compute_stats(key_, transfers_)),
      digest_(digest_of(key_, transfers_)) {}

}  // namespace reshard
