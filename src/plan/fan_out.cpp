#include "fan_out.h"

#include <algorithm>
#include <tuple>

namespace reshard::plan_detail {

std::vector<DeviceId> stage0_receivers(const NamedSharding& dst, const Tiling& dst_tiling, const ChunkIndex& dst_index,
                                       const Topology& topology) {
  const std::vector<DeviceId>& devices = dst.mesh().devices();
  // Bucket the logical devices by slice (a counting sort), then order each
  // bucket, which holds only one slice's replicas, by process and id.
  const auto chunks = static_cast<size_t>(dst_index.size());
  std::vector<size_t> chunk_of(devices.size());
  std::vector<size_t> begin(chunks + 1, 0);
  for (size_t logical = 0; logical < devices.size(); ++logical) {
    chunk_of[logical] = static_cast<size_t>(dst_index.of(dst_tiling.chunk_of_device(static_cast<int64_t>(logical))));
    ++begin[chunk_of[logical] + 1];
  }
  for (size_t c = 0; c < chunks; ++c) begin[c + 1] += begin[c];
  struct Holder {
    int process;
    DeviceId device;
    size_t logical;
  };
  std::vector<Holder> by_chunk(devices.size());
  std::vector<size_t> next(begin.begin(), begin.end() - 1);
  for (size_t logical = 0; logical < devices.size(); ++logical) {
    by_chunk[next[chunk_of[logical]]++] = {topology.process_of(devices[logical]), devices[logical], logical};
  }
  std::vector<DeviceId> receivers(devices.size());
  for (size_t c = 0; c < chunks; ++c) {
    const auto first = by_chunk.begin() + static_cast<std::ptrdiff_t>(begin[c]);
    const auto last = by_chunk.begin() + static_cast<std::ptrdiff_t>(begin[c + 1]);
    if (last - first > 1) {
      std::sort(first, last, [](const Holder& a, const Holder& b) {
        return std::tie(a.process, a.device) < std::tie(b.process, b.device);
      });
    }
    for (auto it = first; it != last; ++it) {
      const bool starts_process = it == first || std::prev(it)->process != it->process;
      receivers[it->logical] = starts_process ? it->device : receivers[std::prev(it)->logical];
    }
  }
  return receivers;
}

}  // namespace reshard::plan_detail
