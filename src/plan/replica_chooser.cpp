#include "replica_chooser.h"

#include <algorithm>

#include <fmt/format.h>

#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard::plan_detail {

using layout_detail::checked_add;

ReplicaChooser::ReplicaChooser(const NamedSharding& src, const Tiling& src_tiling, const ChunkIndex& src_index,
                               const Topology& topology)
    : sent_(static_cast<size_t>(topology.num_processes()), 0) {
  // Bucket the source devices by chunk tuple (a counting sort: this runs for
  // every tensor of a model), then order each bucket, which holds only the
  // replicas of one slice.
  const std::vector<DeviceId>& devices = src.mesh().devices();
  const auto chunks = static_cast<size_t>(src_index.size());
  std::vector<size_t> chunk_of(devices.size());
  devices_begin_.assign(chunks + 1, 0);
  for (size_t logical = 0; logical < devices.size(); ++logical) {
    chunk_of[logical] = static_cast<size_t>(src_index.of(src_tiling.chunk_of_device(static_cast<int64_t>(logical))));
    ++devices_begin_[chunk_of[logical] + 1];
  }
  for (size_t c = 0; c < chunks; ++c) devices_begin_[c + 1] += devices_begin_[c];
  std::vector<ProcessHolder> by_chunk(devices.size());
  std::vector<size_t> next(devices_begin_.begin(), devices_begin_.end() - 1);
  for (size_t logical = 0; logical < devices.size(); ++logical) {
    by_chunk[next[chunk_of[logical]]++] = {topology.process_of(devices[logical]), devices[logical]};
  }
  devices_.reserve(devices.size());
  processes_begin_.assign(chunks + 1, 0);
  for (size_t c = 0; c < chunks; ++c) {
    const auto first = by_chunk.begin() + static_cast<std::ptrdiff_t>(devices_begin_[c]);
    const auto last = by_chunk.begin() + static_cast<std::ptrdiff_t>(devices_begin_[c + 1]);
    std::sort(first, last);  // by process, then device: each process's first entry is its lowest holder
    processes_begin_[c] = processes_.size();
    for (auto it = first; it != last; ++it) {
      devices_.push_back(it->device);
      if (processes_.size() == processes_begin_[c] || processes_.back().process != it->process) processes_.push_back(*it);
    }
    std::sort(devices_.begin() + static_cast<std::ptrdiff_t>(devices_begin_[c]), devices_.end());
  }
  processes_begin_[chunks] = processes_.size();
}

std::span<const DeviceId> ReplicaChooser::devices_holding(int64_t chunk) const {
  const auto c = static_cast<size_t>(chunk);
  return std::span(devices_).subspan(devices_begin_[c], devices_begin_[c + 1] - devices_begin_[c]);
}

std::span<const ReplicaChooser::ProcessHolder> ReplicaChooser::processes_holding(int64_t chunk) const {
  const auto c = static_cast<size_t>(chunk);
  return std::span(processes_).subspan(processes_begin_[c], processes_begin_[c + 1] - processes_begin_[c]);
}

std::optional<DeviceId> ReplicaChooser::local(int64_t src_chunk, DeviceId dst, int dst_process) const {
  const std::span<const DeviceId> devices = devices_holding(src_chunk);
  if (std::binary_search(devices.begin(), devices.end(), dst)) return dst;
  const std::span<const ProcessHolder> processes = processes_holding(src_chunk);
  const auto home = std::lower_bound(processes.begin(), processes.end(), dst_process,
                                     [](const ProcessHolder& p, int process) { return p.process < process; });
  if (home != processes.end() && home->process == dst_process) return home->device;
  return std::nullopt;
}

DeviceId ReplicaChooser::least_loaded(int64_t src_chunk, uint64_t bytes) {
  const std::span<const ProcessHolder> processes = processes_holding(src_chunk);
  if (processes.empty()) {
    // Unreachable for a valid sharding: every chunk tuple is some device's slice.
    throw Error(ErrorCode::kInvalidPlan, fmt::format("no source device holds chunk tuple {}", src_chunk));
  }
  auto least = processes.begin();
  for (auto it = processes.begin(); it != processes.end(); ++it) {
    if (sent_[static_cast<size_t>(it->process)] < sent_[static_cast<size_t>(least->process)]) least = it;
  }
  uint64_t& sent = sent_[static_cast<size_t>(least->process)];
  sent = checked_add(sent, bytes, "bytes sent by one process");
  return least->device;
}

DeviceId ReplicaChooser::choose(int64_t src_chunk, DeviceId dst, int dst_process, uint64_t bytes) {
  if (const std::optional<DeviceId> home = local(src_chunk, dst, dst_process)) return *home;
  return least_loaded(src_chunk, bytes);
}

}  // namespace reshard::plan_detail
