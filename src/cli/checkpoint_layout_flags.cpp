#include "cli/checkpoint_layout_flags.h"

#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/layout_options.h"
#include "reshard/layout/error.h"

namespace reshard::cli {
namespace {

[[noreturn]] void usage(const std::string& message) { throw Error(ErrorCode::kParse, message); }

std::string read_rules_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, fmt::format("--rules {}: cannot open the file", path));
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

}  // namespace

bool CheckpointLayoutFlags::any_besides_mesh() const {
  return !devices.empty() || !num_devices.empty() || !rules.empty() || !best_effort.empty() || strict_rules;
}

void add_checkpoint_layout_flags(CLI::App& command, CheckpointLayoutFlags& flags, const std::string& mesh_help) {
  command.add_option("--mesh", flags.mesh, mesh_help);
  command.add_option("--devices", flags.devices, "The checkpoint mesh's devices in row-major order (default 0..n-1)");
  command.add_option("--num-devices", flags.num_devices,
                     "Devices of the job (default: the largest id used, plus one); device d belongs to process "
                     "floor(d / (T / P))");
  command.add_option("--rules", flags.rules, "A rules file: tensor-name patterns to specs (see above)");
  command.add_flag("--strict-rules", flags.strict_rules,
                   "A rule matching a tensor whose rank its spec does not fit is an error (default: the next "
                   "matching rule, else replication, lays that tensor out)");
  command.add_option("--best-effort", flags.best_effort,
                     "Shard each tensor's last dimension divisible by this axis's size over it; replicate the rest");
}

CheckpointLayout checkpoint_layout_from_flags(const CheckpointLayoutFlags& flags, int processes) {
  if (flags.rules.empty() == flags.best_effort.empty()) {
    usage("--mesh: give exactly one of --rules FILE and --best-effort AXIS");
  }
  LayoutFlags mesh_flags;
  mesh_flags.mesh = flags.mesh;
  mesh_flags.devices = flags.devices;
  Mesh mesh = sharding_from_flags(mesh_flags).mesh();
  JobFlags job;
  job.num_devices = flags.num_devices;
  Topology topology = topology_from_flags(job, {&mesh}, processes);
  CheckpointLayout layout{std::move(mesh), std::move(topology), {}, std::nullopt, flags.strict_rules};
  if (!flags.best_effort.empty()) {
    if (!layout.mesh.axis_index(flags.best_effort)) {
      usage(fmt::format("--best-effort {}: the mesh has no such axis", flags.best_effort));
    }
    layout.best_effort_axis = flags.best_effort;
  } else {
    const std::string text = read_rules_file(flags.rules);
    try {
      layout.rules = parse_layout_rules(text, flags.rules);
    } catch (const Error& e) {
      // A malformed rules file is bad input (exit 1), not a usage error.
      if (e.code() == ErrorCode::kParse) throw Error(ErrorCode::kInvalidConfig, fmt::format("--rules {}", e.what()));
      throw;
    }
  }
  return layout;
}

std::optional<DType> float_cast_from_flag(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const DType dtype = dtype_from_flag(text, "--dtype");
  if (!is_castable_float(dtype)) usage(fmt::format("--dtype {}: must be f32, f16 or bf16", text));
  return dtype;
}

}  // namespace reshard::cli
