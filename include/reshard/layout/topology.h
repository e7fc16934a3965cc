// Devices and the topology of a job: which process owns which device.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace reshard {

using DeviceId = int64_t;

// Where a buffer lives, as XLA's memory kinds.
enum class MemoryKind { kDevice, kPinnedHost, kUnpinnedHost };

std::string_view memory_kind_name(MemoryKind kind);  // "device", "pinned_host", ...
MemoryKind memory_kind_from_string(std::string_view name);  // throws Error(kParse)

// One memory space owned by one process.
struct Device {
  DeviceId id = 0;
  int process = 0;
  std::string platform = "cpu";
};

// Every device of a job with its owning process, and each process's host.
// Device ids are 0..n-1. Every process holds the same topology, so every
// process plans identically. Hosts are what the ranks really share (a kernel
// and a network); unless told (with_hosts), each process is a host of its own.
class Topology {
 public:
  // Device d belongs to process floor(d / (num_devices / num_processes)), the
  // rule the command line and the default topology use. Throws
  // Error(kInvalidArgument) unless num_devices > 0, num_processes > 0 and
  // num_processes divides num_devices.
  static Topology uniform(int64_t num_devices, int num_processes);

  // process_of_device[d] owns device d. Processes must be 0..P-1, each owning
  // at least one device.
  static Topology explicit_processes(std::vector<int> process_of_device);

  // This topology with process p on host host_of_process[p]. Hosts must be
  // 0..H-1, each with at least one process. Throws Error(kInvalidArgument)
  // unless there is one entry per process.
  Topology with_hosts(std::vector<int> host_of_process) const;
  // Processes 0..P-1 over `num_hosts` hosts in consecutive runs of P / H (as
  // mpirun places ranks by slot). Throws Error(kInvalidArgument) unless H
  // divides P.
  Topology with_uniform_hosts(int num_hosts) const;

  int64_t num_devices() const { return static_cast<int64_t>(process_of_device_.size()); }
  int num_processes() const { return num_processes_; }
  int num_hosts() const { return host_of_process_.empty() ? num_processes_ : num_hosts_; }
  // Whether some host has several processes (so plans have hosts to care about).
  bool hosts_shared() const { return num_hosts() < num_processes_; }

  // Throws Error(kUnknownDevice) for an id outside 0..n-1.
  int process_of(DeviceId device) const;
  // The host of `process` (0..P-1, unchecked beyond a debug assertion).
  int host_of_process(int process) const {
    return host_of_process_.empty() ? process : host_of_process_[static_cast<size_t>(process)];
  }
  Device device(DeviceId id) const;
  std::vector<DeviceId> devices_of(int process) const;
  bool contains(DeviceId device) const { return device >= 0 && device < num_devices(); }
  // Throws Error(kUnknownDevice) when `devices` (a mesh's, `what` names it)
  // holds ids this topology lacks, naming them and the topology's size.
  void check_contains(std::span<const DeviceId> devices, std::string_view what) const;

  // Whether both give every device the same process (hosts aside).
  bool same_processes(const Topology& other) const { return process_of_device_ == other.process_of_device_; }

  bool operator==(const Topology&) const = default;

 private:
  Topology(std::vector<int> process_of_device, int num_processes);
  std::vector<int> process_of_device_;
  int num_processes_ = 0;
  std::vector<int> host_of_process_;  // empty: each process its own host
  int num_hosts_ = 0;
};

}  // namespace reshard
