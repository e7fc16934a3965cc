// The layout flags (--mesh, --spec, --devices, --num-devices, --processes),
// shared by subcommands.
#pragma once

#include <string>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/mesh.h"
#include "reshard/layout/sharding.h"
#include "reshard/layout/topology.h"

namespace CLI {
class App;
}

namespace reshard::cli {

// The raw text of one layout's flags, as given on the command line.
struct LayoutFlags {
  explicit LayoutFlags(std::string flag_prefix = "") : prefix(std::move(flag_prefix)) {}

  std::string prefix;   // "" for --mesh, "src-" for --src-mesh, ...
  std::string mesh;     // required
  std::string devices;  // empty: 0..n-1
  std::string spec;     // empty: fully replicated
  std::string flag(const std::string& name) const { return "--" + prefix + name; }
};

// Adds --<prefix>mesh (required), --<prefix>devices and --<prefix>spec to
// `command`, bound to `flags` (which must outlive parsing).
void add_layout_flags(CLI::App& command, LayoutFlags& flags, const std::string& what);

// The sharding the flags describe. Errors name the flag at fault
// ("--src-spec: ..."): Error(kParse) for text that does not parse (a usage
// error), the sharding's own typed errors for a layout that cannot exist.
NamedSharding sharding_from_flags(const LayoutFlags& flags, bool uneven = false);

// The raw text of the job flags --num-devices and --processes.
struct JobFlags {
  std::string num_devices;  // empty: the largest device id used, plus one
  std::string processes;    // empty: the default the caller passes
};

// Adds --num-devices and --processes to `command`, bound to `flags`.
void add_job_flags(CLI::App& command, JobFlags& flags);

// The job's topology: device d belongs to process floor(d / (T / P)).
// T defaults to the largest device id of `meshes` plus one, P to
// `default_processes`. Throws Error(kParse) naming --num-devices or
// --processes when they do not parse, leave out a mesh's device, or do not divide.
Topology topology_from_flags(const JobFlags& flags, const std::vector<const Mesh*>& meshes,
                             int default_processes = 1);

// --shape and --dtype, with errors naming the flag.
Shape shape_from_flag(const std::string& text, const std::string& flag = "--shape");
DType dtype_from_flag(const std::string& text, const std::string& flag = "--dtype");

}  // namespace reshard::cli
