#include "plan/support/reference_plan.h"

#include <algorithm>
#include <map>

namespace reshard::testing {
namespace {

using SliceKey = std::pair<std::vector<int64_t>, Shape>;

// The source devices holding each distinct slice.
std::map<SliceKey, std::vector<DeviceId>> holders_by_slice(const PlanKey& key) {
  const std::vector<Box> boxes = key.src.index_domains(key.shape);
  std::map<SliceKey, std::vector<DeviceId>> holders;
  for (size_t i = 0; i < boxes.size(); ++i) {
    holders[{boxes[i].origin(), boxes[i].shape()}].push_back(key.src.mesh().devices()[i]);
  }
  return holders;
}

class RuleOfReplicas {
 public:
  explicit RuleOfReplicas(const Topology& topology) : topology_(topology) {}

  DeviceId choose(const std::vector<DeviceId>& holders, DeviceId dst, uint64_t bytes) {
    if (std::find(holders.begin(), holders.end(), dst) != holders.end()) return dst;
    const int home = topology_.process_of(dst);
    std::map<int, DeviceId> lowest_by_process;
    for (DeviceId d : holders) {
      auto [it, inserted] = lowest_by_process.emplace(topology_.process_of(d), d);
      if (!inserted) it->second = std::min(it->second, d);
    }
    if (auto it = lowest_by_process.find(home); it != lowest_by_process.end()) return it->second;
    int best = -1;
    for (const auto& [process, device] : lowest_by_process) {
      if (best < 0 || sent_[process] < sent_[best]) best = process;
    }
    sent_[best] += bytes;
    return lowest_by_process[best];
  }

 private:
  const Topology& topology_;
  std::map<int, uint64_t> sent_;
};

bool origin_less(const Box& a, const Box& b) { return a.origin() < b.origin(); }

// Calls visit(index) for every index inside `box`.
template <typename Visit>
void for_each_index(const Box& box, Visit&& visit) {
  if (box.empty()) return;
  std::vector<int64_t> index = box.origin();
  while (true) {
    visit(index);
    size_t d = box.rank();
    while (d > 0) {
      --d;
      if (++index[d] < box.origin()[d] + box.shape()[d]) break;
      index[d] = box.origin()[d];
      if (d == 0) return;
    }
    if (box.rank() == 0) return;
  }
}

bool holds(const Box& box, const std::vector<int64_t>& index) {
  for (size_t d = 0; d < box.rank(); ++d) {
    if (index[d] < box.origin()[d] || index[d] >= box.origin()[d] + box.shape()[d]) return false;
  }
  return true;
}

}  // namespace

std::vector<Transfer> reference_transfers(const PlanKey& key) {
  const auto holders = holders_by_slice(key);
  const std::vector<Box> targets = key.dst.index_domains(key.shape);
  RuleOfReplicas rule(key.topology);
  std::vector<Transfer> transfers;
  for (size_t t = 0; t < targets.size(); ++t) {
    const DeviceId dst = key.dst.mesh().devices()[t];
    std::vector<std::pair<Box, const std::vector<DeviceId>*>> pieces;
    for (const auto& [slice, devices] : holders) {
      const Box common = targets[t].intersect(Box(slice.first, slice.second));
      if (!common.empty()) pieces.emplace_back(common, &devices);
    }
    std::sort(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) { return origin_less(a.first, b.first); });
    for (const auto& [box, devices] : pieces) {
      const uint64_t bytes = dtype_byte_size(key.dtype, static_cast<uint64_t>(box.volume()));
      transfers.push_back({rule.choose(*devices, dst, bytes), dst, box});
    }
  }
  return transfers;
}

uint64_t minimum_cross_process_bytes(const PlanKey& key) {
  const std::vector<Box> sources = key.src.index_domains(key.shape);
  const std::vector<Box> targets = key.dst.index_domains(key.shape);
  uint64_t elements = 0;
  for (size_t t = 0; t < targets.size(); ++t) {
    const int home = key.topology.process_of(key.dst.mesh().devices()[t]);
    std::vector<const Box*> local;
    for (size_t s = 0; s < sources.size(); ++s) {
      if (key.topology.process_of(key.src.mesh().devices()[s]) == home) local.push_back(&sources[s]);
    }
    for_each_index(targets[t], [&](const std::vector<int64_t>& index) {
      const bool held = std::any_of(local.begin(), local.end(), [&](const Box* b) { return holds(*b, index); });
      if (!held) ++elements;
    });
  }
  return dtype_byte_size(key.dtype, elements);
}

}  // namespace reshard::testing
