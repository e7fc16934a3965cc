#include "fan_out.h"

namespace reshard::plan_detail {

std::vector<DeviceId> stage0_receivers(const NamedSharding& dst, const Tiling& dst_tiling, const ChunkIndex& dst_index,
                                       const Topology& topology, ReceiverScope scope) {
  const std::vector<DeviceId>& devices = dst.mesh().devices();
  // Every slice on one device only (no replication axis): each receives for itself.
  if (dst_index.size() == static_cast<int64_t>(devices.size())) return devices;
  // Bucket the logical devices by slice (a counting sort: this runs for every
  // tensor of a model), then find each process's lowest id within a bucket.
  const auto chunks = static_cast<size_t>(dst_index.size());
  std::vector<size_t> chunk_of(devices.size());
  std::vector<size_t> begin(chunks + 1, 0);
  for (size_t logical = 0; logical < devices.size(); ++logical) {
    chunk_of[logical] = static_cast<size_t>(dst_index.of(dst_tiling.chunk_of_device(static_cast<int64_t>(logical))));
    ++begin[chunk_of[logical] + 1];
  }
  for (size_t c = 0; c < chunks; ++c) begin[c + 1] += begin[c];
  std::vector<size_t> by_chunk(devices.size());  // logical devices, grouped by slice
  std::vector<size_t> next(begin.begin(), begin.end() - 1);
  for (size_t logical = 0; logical < devices.size(); ++logical) by_chunk[next[chunk_of[logical]]++] = logical;
  const bool by_host = scope == ReceiverScope::kHost;
  std::vector<int> process_of(devices.size());  // or host
  for (size_t logical = 0; logical < devices.size(); ++logical) {
    const int process = topology.process_of(devices[logical]);
    process_of[logical] = by_host ? topology.host_of_process(process) : process;
  }
  const int groups = by_host ? topology.num_hosts() : topology.num_processes();
  std::vector<DeviceId> lowest(static_cast<size_t>(groups), -1);  // reset after each bucket
  std::vector<DeviceId> receivers(devices.size());
  for (size_t c = 0; c < chunks; ++c) {
    for (size_t i = begin[c]; i < begin[c + 1]; ++i) {
      DeviceId& best = lowest[static_cast<size_t>(process_of[by_chunk[i]])];
      if (best < 0 || devices[by_chunk[i]] < best) best = devices[by_chunk[i]];
    }
    for (size_t i = begin[c]; i < begin[c + 1]; ++i) receivers[by_chunk[i]] = lowest[static_cast<size_t>(process_of[by_chunk[i]])];
    for (size_t i = begin[c]; i < begin[c + 1]; ++i) lowest[static_cast<size_t>(process_of[by_chunk[i]])] = -1;
  }
  return receivers;
}

}  // namespace reshard::plan_detail
