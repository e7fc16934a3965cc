// Host memory as plan targets: one extra "host device" per process.
#pragma once

#include "reshard/layout/sharding.h"
#include "reshard/layout/topology.h"

namespace reshard::execute_detail {

// A job's topology with one host device per process appended (process p's is
// device num_devices + p), so that moves to and from hosts are ordinary plans:
// the planner then fetches each element once, preferring the process's own
// devices, and no process receives what it already has.
class HostLayout {
 public:
  explicit HostLayout(const Topology& devices);

  const Topology& topology() const { return topology_; }

  // The whole array replicated on every process's host.
  NamedSharding on_every_host() const;
  // The whole array on `process`'s host only.
  NamedSharding on_host(int process) const;
  DeviceId host_device(int process) const { return first_host_ + process; }

 private:
  Topology topology_;
  DeviceId first_host_;
};

}  // namespace reshard::execute_detail
