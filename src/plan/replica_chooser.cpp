#include "replica_chooser.h"

#include <algorithm>

#include <fmt/format.h>

#include "reshard/layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard::plan_detail {

ReplicaChooser::ReplicaChooser(const NamedSharding& src, const Tiling& src_tiling,
                               const ChunkIndex& src_index, const Topology& topology)
    : holders_(static_cast<size_t>(src_index.size())),
      sent_(static_cast<size_t>(topology.num_processes()), 0) {
  const std::vector<DeviceId>& devices = src.mesh().devices();
  for (size_t logical = 0; logical < devices.size(); ++logical) {
    const int64_t chunk = src_index.of(src_tiling.chunk_of_device[logical]);
    holders_[static_cast<size_t>(chunk)].devices.push_back(devices[logical]);
  }
  for (Holders& h : holders_) {
    std::sort(h.devices.begin(), h.devices.end());
    for (DeviceId d : h.devices) h.by_process.emplace_back(topology.process_of(d), d);
    // Sorted by (process, device), the first entry of each process is its lowest holder.
    std::sort(h.by_process.begin(), h.by_process.end());
    const auto same_process = [](const auto& a, const auto& b) { return a.first == b.first; };
    h.by_process.erase(std::unique(h.by_process.begin(), h.by_process.end(), same_process), h.by_process.end());
  }
}

DeviceId ReplicaChooser::choose(int64_t src_chunk, DeviceId dst, int dst_process, uint64_t bytes) {
  const Holders& h = holders_[static_cast<size_t>(src_chunk)];
  if (h.by_process.empty()) {
    // Unreachable for a valid sharding: every chunk tuple is some device's slice.
    throw Error(ErrorCode::kInvalidPlan, fmt::format("no source device holds chunk tuple {}", src_chunk));
  }
  if (std::binary_search(h.devices.begin(), h.devices.end(), dst)) return dst;
  const auto local = std::lower_bound(h.by_process.begin(), h.by_process.end(), std::pair{dst_process, DeviceId{0}},
                                      [](const auto& a, const auto& b) { return a.first < b.first; });
  if (local != h.by_process.end() && local->first == dst_process) return local->second;
  auto least = h.by_process.begin();
  for (auto it = h.by_process.begin(); it != h.by_process.end(); ++it) {
    if (sent_[static_cast<size_t>(it->first)] < sent_[static_cast<size_t>(least->first)]) least = it;
  }
  uint64_t& sent = sent_[static_cast<size_t>(least->first)];
  sent = checked_add(sent, bytes, "bytes sent by one process");
  return least->second;
}

}  // namespace reshard::plan_detail
