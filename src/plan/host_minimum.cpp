// min_bytes_into_hosts: the per-host lower bound that plans are checked against.
#include <algorithm>

#include "layout/checked.h"
#include "reshard/plan/plan.h"

namespace reshard {

using layout_detail::checked_add;

namespace {

// The distinct slices of the sharding's devices on each host. A layout's
// distinct slices tile the array, so they are pairwise disjoint.
std::vector<std::vector<Box>> slices_by_host(const NamedSharding& sharding, const PlanKey& key) {
  const std::vector<Box> boxes = sharding.index_domains(key.shape);
  const std::vector<DeviceId>& devices = sharding.mesh().devices();
  key.topology.check_contains(devices, "the mesh");
  std::vector<std::vector<Box>> by_host(static_cast<size_t>(key.topology.num_hosts()));
  for (size_t logical = 0; logical < devices.size(); ++logical) {
    auto& slices = by_host[static_cast<size_t>(key.topology.host_of_process(key.topology.process_of(devices[logical])))];
    if (std::find(slices.begin(), slices.end(), boxes[logical]) == slices.end()) slices.push_back(boxes[logical]);
  }
  return by_host;
}

}  // namespace

std::vector<uint64_t> min_bytes_into_hosts(const PlanKey& key) {
  const auto targets = slices_by_host(key.dst, key);
  const auto sources = slices_by_host(key.src, key);
  std::vector<uint64_t> bytes(targets.size(), 0);
  for (size_t host = 0; host < targets.size(); ++host) {
    uint64_t elements = 0;
    for (const Box& wanted : targets[host]) {
      auto missing = static_cast<uint64_t>(wanted.volume());
      for (const Box& held : sources[host]) {
        missing -= static_cast<uint64_t>(wanted.intersect(held).volume());  // 0 when apart
      }
      elements = checked_add(elements, missing, "bytes into a host");
    }
    bytes[host] = dtype_byte_size(key.dtype, elements);
  }
  return bytes;
}

}  // namespace reshard
