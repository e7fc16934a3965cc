#include "reshard/layout/topology.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "reshard/layout/error.h"

namespace reshard {

std::string_view memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kPinnedHost: return "pinned_host";
    case MemoryKind::kUnpinnedHost: return "unpinned_host";
  }
  return "device";
}

MemoryKind memory_kind_from_string(std::string_view name) {
  for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost, MemoryKind::kUnpinnedHost}) {
    if (memory_kind_name(kind) == name) return kind;
  }
  throw Error(ErrorCode::kParse,
              fmt::format("unknown memory kind '{}' (expected device, pinned_host or unpinned_host)",
                          name));
}

Topology::Topology(std::vector<int> process_of_device, int num_processes)
    : process_of_device_(std::move(process_of_device)), num_processes_(num_processes) {}

Topology Topology::uniform(int64_t num_devices, int num_processes) {
  if (num_devices <= 0 || num_processes <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a topology needs at least one device and one process (got {} devices, "
                            "{} processes)",
                            num_devices, num_processes));
  }
  if (num_devices % num_processes != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} devices cannot be split evenly over {} processes", num_devices,
                            num_processes));
  }
  const int64_t per_process = num_devices / num_processes;
  std::vector<int> owner(static_cast<size_t>(num_devices));
  for (int64_t d = 0; d < num_devices; ++d) owner[static_cast<size_t>(d)] = static_cast<int>(d / per_process);
  return Topology(std::move(owner), num_processes);
}

Topology Topology::explicit_processes(std::vector<int> process_of_device) {
  if (process_of_device.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "a topology needs at least one device");
  }
  for (size_t d = 0; d < process_of_device.size(); ++d) {
    if (process_of_device[d] < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("device {} has negative process {}", d, process_of_device[d]));
    }
  }
  const int max_process = *std::max_element(process_of_device.begin(), process_of_device.end());
  // Checked before sizing `seen` by it: a huge id must not become a huge allocation.
  if (static_cast<size_t>(max_process) >= process_of_device.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("process {} is named but there are only {} devices (processes must be "
                            "0..P-1 and each own a device)",
                            max_process, process_of_device.size()));
  }
  std::vector<bool> seen(static_cast<size_t>(max_process) + 1, false);
  for (int process : process_of_device) seen[static_cast<size_t>(process)] = true;
  for (size_t p = 0; p < seen.size(); ++p) {
    if (!seen[p]) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("process {} owns no device (processes must be 0..{} and each own one)",
                              p, max_process));
    }
  }
  return Topology(std::move(process_of_device), max_process + 1);
}

int Topology::process_of(DeviceId device) const {
  if (!contains(device)) {
    throw Error(ErrorCode::kUnknownDevice,
                fmt::format("device {} is not in the job (devices are 0..{})", device,
                            num_devices() - 1));
  }
  return process_of_device_[static_cast<size_t>(device)];
}

void Topology::check_contains(std::span<const DeviceId> devices, std::string_view what) const {
  constexpr size_t kNamed = 8;  // enough to see the pattern; the count says the rest
  std::vector<DeviceId> lacking;
  for (DeviceId d : devices) {
    if (!contains(d)) lacking.push_back(d);
  }
  if (lacking.empty()) return;
  std::string named = fmt::format("{}", fmt::join(lacking.begin(), lacking.begin() + static_cast<std::ptrdiff_t>(
                                                                           std::min(lacking.size(), kNamed)), ", "));
  if (lacking.size() > kNamed) named += fmt::format(", ... ({} in all)", lacking.size());
  throw Error(ErrorCode::kUnknownDevice,
              fmt::format("{} names devices the topology lacks: {}; the topology has {} devices (0..{})", what, named,
                          num_devices(), num_devices() - 1));
}

Topology Topology::with_hosts(std::vector<int> host_of_process) const {
  if (host_of_process.size() != static_cast<size_t>(num_processes_)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} hosts were given for {} processes (one per process)",
                                                         host_of_process.size(), num_processes_));
  }
  std::vector<bool> seen(host_of_process.size(), false);
  for (size_t p = 0; p < host_of_process.size(); ++p) {
    const int host = host_of_process[p];
    if (host < 0 || static_cast<size_t>(host) >= host_of_process.size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("process {} is on host {}; hosts are 0..H-1 with H at most the {} processes", p, host,
                              num_processes_));
    }
    seen[static_cast<size_t>(host)] = true;
  }
  const auto hosts = static_cast<size_t>(std::find(seen.begin(), seen.end(), false) - seen.begin());
  for (size_t h = hosts; h < seen.size(); ++h) {
    if (seen[h]) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("host {} has no process (hosts must be 0..{} and each hold one)", hosts, h));
    }
  }
  Topology out = *this;
  // Each process its own host is the default: kept empty, so such topologies stay equal.
  const bool own_hosts = hosts == host_of_process.size();
  out.num_hosts_ = own_hosts ? 0 : static_cast<int>(hosts);
  out.host_of_process_ = own_hosts ? std::vector<int>{} : std::move(host_of_process);
  return out;
}

Topology Topology::with_uniform_hosts(int num_hosts) const {
  if (num_hosts <= 0 || num_processes_ % num_hosts != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} processes cannot be split evenly over {} hosts", num_processes_, num_hosts));
  }
  const int per_host = num_processes_ / num_hosts;
  std::vector<int> hosts(static_cast<size_t>(num_processes_));
  for (int p = 0; p < num_processes_; ++p) hosts[static_cast<size_t>(p)] = p / per_host;
  return with_hosts(std::move(hosts));
}

Device Topology::device(DeviceId id) const { return Device{id, process_of(id), "cpu"}; }

std::vector<DeviceId> Topology::devices_of(int process) const {
  std::vector<DeviceId> out;
  for (DeviceId d = 0; d < num_devices(); ++d) {
    if (process_of_device_[static_cast<size_t>(d)] == process) out.push_back(d);
  }
  return out;
}

}  // namespace reshard
