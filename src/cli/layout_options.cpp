#include "cli/layout_options.h"

#include <algorithm>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/layout/parse.h"
#include "reshard/layout/partition_spec.h"

namespace reshard::cli {
namespace {

// Runs `parse`, putting the flag's name in front of any error it throws.
template <typename Parse>
auto naming_flag(const std::string& flag, Parse&& parse) {
  try {
    return parse();
  } catch (const Error& e) {
    throw e.with_context(flag);
  }
}

// More devices than any job has; a guard against allocating for a typo.
constexpr int64_t kMaxDevices = int64_t{1} << 20;

[[noreturn]] void usage_error(const std::string& flag, const std::string& message) {
  throw Error(ErrorCode::kParse, fmt::format("{}: {}", flag, message));
}

}  // namespace

void add_layout_flags(CLI::App& command, LayoutFlags& flags, const std::string& what) {
  command.add_option(flags.flag("mesh"), flags.mesh, fmt::format("Mesh axes of the {}, e.g. data=4,model=4", what))
      ->required();
  command.add_option(flags.flag("devices"), flags.devices,
                     fmt::format("Devices of the {} mesh in row-major order (default 0..n-1)", what));
  command.add_option(flags.flag("spec"), flags.spec,
                     fmt::format("PartitionSpec of the {}, e.g. 'None,data' or \"P('data', None)\"; "
                                 "empty: replicated",
                                 what));
}

NamedSharding sharding_from_flags(const LayoutFlags& flags, bool uneven) {
  const std::vector<MeshAxis> axes = naming_flag(flags.flag("mesh"), [&] { return parse_mesh_axes(flags.mesh); });
  int64_t size = 1;
  for (const MeshAxis& axis : axes) {
    if (axis.size > kMaxDevices || (size *= axis.size) > kMaxDevices) {  // both at most 2^20: no overflow
      usage_error(flags.flag("mesh"), fmt::format("a mesh of more than {} devices", kMaxDevices));
    }
  }
  Mesh mesh = naming_flag(flags.devices.empty() ? flags.flag("mesh") : flags.flag("devices"), [&] {
    return flags.devices.empty() ? Mesh::with_default_order(axes) : Mesh(axes, parse_device_list(flags.devices));
  });
  for (DeviceId d : mesh.devices()) {
    if (d >= kMaxDevices) usage_error(flags.flag("devices"), fmt::format("device id {} is too large", d));
  }
  PartitionSpec spec = naming_flag(flags.flag("spec"), [&] {
    PartitionSpec parsed = PartitionSpec::parse(flags.spec);
    parsed.validate(mesh, parsed.size());  // axes known and used once; rank is checked against the shape later
    return parsed;
  });
  return NamedSharding(std::move(mesh), std::move(spec), MemoryKind::kDevice, uneven);
}

void add_job_flags(CLI::App& command, JobFlags& flags) {
  command.add_option("--num-devices", flags.num_devices,
                     "Devices in the job, T (default: the largest device id used, plus one)");
  command.add_option("--processes", flags.processes,
                     "Processes in the job, P (default: the MPI world size under mpirun, else 1); device d "
                     "belongs to process floor(d / (T / P))");
}

Topology topology_from_flags(const JobFlags& flags, const std::vector<const Mesh*>& meshes,
                             int default_processes) {
  DeviceId largest = 0;
  for (const Mesh* mesh : meshes) {
    for (DeviceId d : mesh->devices()) largest = std::max(largest, d);
  }
  int64_t num_devices = largest + 1;
  if (!flags.num_devices.empty()) {
    num_devices = naming_flag("--num-devices", [&] { return parse_count(flags.num_devices, "device count"); });
    if (num_devices > kMaxDevices) usage_error("--num-devices", fmt::format("more than {} devices", kMaxDevices));
    if (num_devices <= largest) {
      usage_error("--num-devices", fmt::format("{} devices (ids 0..{}) leave out device {}, which a mesh uses",
                                               num_devices, num_devices - 1, largest));
    }
  }
  int64_t processes = default_processes;
  if (!flags.processes.empty()) {
    processes = naming_flag("--processes", [&] { return parse_count(flags.processes, "process count"); });
  }
  if (processes < 1 || processes > num_devices) {
    usage_error("--processes", fmt::format("{} processes for {} devices (need 1..{})", processes, num_devices,
                                           num_devices));
  }
  if (num_devices % processes != 0) {
    usage_error("--processes", fmt::format("{} devices cannot be split evenly over {} processes", num_devices,
                                           processes));
  }
  return Topology::uniform(num_devices, static_cast<int>(processes));
}

Shape shape_from_flag(const std::string& text, const std::string& flag) {
  return naming_flag(flag, [&] { return parse_shape(text); });
}

DType dtype_from_flag(const std::string& text, const std::string& flag) {
  return naming_flag(flag, [&] { return dtype_from_string(text); });
}

}  // namespace reshard::cli
