#include "plan/support/reference_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

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

namespace {

// The fewest bytes any plan must bring into each group of processes (a
// process, or a host), element by element.
template <typename GroupOf>
std::vector<uint64_t> minimum_bytes_into_each_group(const PlanKey& key, int groups, GroupOf&& group_of) {
  const std::vector<Box> sources = key.src.index_domains(key.shape);
  const std::vector<Box> targets = key.dst.index_domains(key.shape);
  std::vector<uint64_t> bytes(static_cast<size_t>(groups), 0);
  for (int g = 0; g < groups; ++g) {
    std::set<std::vector<int64_t>> needed;
    for (size_t t = 0; t < targets.size(); ++t) {
      if (group_of(key.dst.mesh().devices()[t]) != g) continue;
      for_each_index(targets[t], [&](const std::vector<int64_t>& index) {
        for (size_t s = 0; s < sources.size(); ++s) {
          if (group_of(key.src.mesh().devices()[s]) == g && holds(sources[s], index)) return;
        }
        needed.insert(index);
      });
    }
    bytes[static_cast<size_t>(g)] = dtype_byte_size(key.dtype, needed.size());
  }
  return bytes;
}

}  // namespace

std::vector<uint64_t> minimum_bytes_into_each_process(const PlanKey& key) {
  return minimum_bytes_into_each_group(key, key.topology.num_processes(),
                                       [&](DeviceId d) { return key.topology.process_of(d); });
}

std::vector<uint64_t> minimum_bytes_into_each_host(const PlanKey& key) {
  return minimum_bytes_into_each_group(key, key.topology.num_hosts(), [&](DeviceId d) {
    return key.topology.host_of_process(key.topology.process_of(d));
  });
}

void expect_exact_cover_by_elements(const Plan& plan) {
  const PlanKey& key = plan.key();
  std::map<DeviceId, std::map<std::vector<int64_t>, int>> stage0;  // device -> element -> times received
  std::map<DeviceId, std::map<std::vector<int64_t>, int>> all;
  for (const Transfer& t : plan.transfers()) {
    for_each_index(t.box, [&](const std::vector<int64_t>& index) {
      ++all[t.dst][index];
      if (t.stage == 0) ++stage0[t.dst][index];
    });
  }
  const std::vector<Box> slices = key.dst.index_domains(key.shape);
  for (size_t logical = 0; logical < slices.size(); ++logical) {
    const DeviceId device = key.dst.mesh().devices()[logical];
    int64_t elements = 0;
    for_each_index(slices[logical], [&](const std::vector<int64_t>& index) {
      ++elements;
      EXPECT_EQ(all[device][index], 1) << "device " << device << " element " << ::testing::PrintToString(index);
    });
    EXPECT_EQ(static_cast<int64_t>(all[device].size()), elements) << "device " << device;
  }
  for (const Transfer& t : plan.transfers()) {
    if (t.stage == 0) continue;
    const int from = key.topology.process_of(t.src);
    const int to = key.topology.process_of(t.dst);
    if (t.stage == 1) {
      EXPECT_EQ(from, to) << "a stage-1 copy crosses processes";
    } else {
      EXPECT_EQ(t.stage, 2);
      EXPECT_NE(from, to) << "a stage-2 copy stays in its process";
      EXPECT_EQ(key.topology.host_of_process(from), key.topology.host_of_process(to)) << "a relay crosses hosts";
    }
    for_each_index(t.box, [&](const std::vector<int64_t>& index) {
      EXPECT_EQ(stage0[t.src][index], 1) << "stage-" << t.stage << " source " << t.src << " lacks "
                                         << ::testing::PrintToString(index);
    });
  }
}

SendBound sender_bound(std::span<const PlanKey> keys) {
  std::map<int, uint64_t> fixed;                 // bytes only this process holds
  std::map<std::set<int>, uint64_t> shared;      // bytes these processes all hold
  uint64_t largest_row = 0;
  for (const PlanKey& key : keys) {
    const std::vector<Box> sources = key.src.index_domains(key.shape);
    const std::vector<Box> targets = key.dst.index_domains(key.shape);
    const uint64_t element = dtype_byte_size(key.dtype, 1);
    for (int p = 0; p < key.topology.num_processes(); ++p) {
      std::map<std::vector<int64_t>, std::set<int>> holders_of_needed;
      for (size_t t = 0; t < targets.size(); ++t) {
        if (key.topology.process_of(key.dst.mesh().devices()[t]) != p) continue;
        for_each_index(targets[t], [&](const std::vector<int64_t>& index) {
          std::set<int> holders;
          for (size_t s = 0; s < sources.size(); ++s) {
            if (holds(sources[s], index)) holders.insert(key.topology.process_of(key.src.mesh().devices()[s]));
          }
          if (!holders.contains(p)) holders_of_needed[index] = holders;
        });
      }
      for (const auto& [index, holders] : holders_of_needed) {
        if (holders.size() == 1) {
          fixed[*holders.begin()] += element;
        } else {
          shared[holders] += element;
        }
      }
    }
    // The largest row of a shared piece: a target slice cut by a source slice.
    for (const Box& target : targets) {
      for (const Box& source : sources) {
        const Box piece = target.intersect(source);
        if (piece.empty()) continue;
        size_t dim = 0;
        while (dim < piece.rank() && piece.shape()[dim] <= 1) ++dim;
        const int64_t rows = dim < piece.rank() ? piece.shape()[dim] : 1;
        largest_row = std::max(largest_row, element * static_cast<uint64_t>(piece.volume() / rows));
      }
    }
  }
  SendBound bound;
  for (const auto& [process, bytes] : fixed) bound.least_max_send = std::max(bound.least_max_send, bytes);
  std::vector<int> involved;
  for (const auto& [holders, bytes] : shared) {
    bound.shared_bytes += bytes;
    involved.insert(involved.end(), holders.begin(), holders.end());
  }
  std::sort(involved.begin(), involved.end());
  involved.erase(std::unique(involved.begin(), involved.end()), involved.end());
  if (involved.size() > 12) return bound;
  bound.known = true;
  bound.rounding = 2 * shared.size() * largest_row;
  for (uint32_t subset = 1; subset < (1u << involved.size()); ++subset) {
    std::set<int> members;
    for (size_t i = 0; i < involved.size(); ++i) {
      if (subset & (1u << i)) members.insert(involved[i]);
    }
    uint64_t load = 0;
    for (int m : members) load += fixed.contains(m) ? fixed.at(m) : 0;
    for (const auto& [holders, bytes] : shared) {
      if (std::includes(members.begin(), members.end(), holders.begin(), holders.end())) load += bytes;
    }
    const uint64_t even = (load + members.size() - 1) / members.size();
    bound.least_max_send = std::max(bound.least_max_send, even);
  }
  return bound;
}

}  // namespace reshard::testing
