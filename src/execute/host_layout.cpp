#include "host_layout.h"

namespace reshard::execute_detail {
namespace {

Topology with_host_devices(const Topology& devices) {
  std::vector<int> owners;
  owners.reserve(static_cast<size_t>(devices.num_devices() + devices.num_processes()));
  for (DeviceId d = 0; d < devices.num_devices(); ++d) owners.push_back(devices.process_of(d));
  for (int p = 0; p < devices.num_processes(); ++p) owners.push_back(p);
  return Topology::explicit_processes(std::move(owners));
}

}  // namespace

HostLayout::HostLayout(const Topology& devices)
    : topology_(with_host_devices(devices)), first_host_(devices.num_devices()) {}

NamedSharding HostLayout::on_every_host() const {
  std::vector<DeviceId> hosts;
  for (int p = 0; p < topology_.num_processes(); ++p) hosts.push_back(host_device(p));
  const int64_t count = topology_.num_processes();
  return NamedSharding(Mesh({MeshAxis{"hosts", count}}, std::move(hosts)), PartitionSpec(),
                       MemoryKind::kUnpinnedHost);
}

NamedSharding HostLayout::on_host(int process) const {
  return NamedSharding(Mesh({MeshAxis{"hosts", 1}}, {host_device(process)}), PartitionSpec(),
                       MemoryKind::kUnpinnedHost);
}

}  // namespace reshard::execute_detail
