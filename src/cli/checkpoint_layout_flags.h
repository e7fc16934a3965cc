// The flags that lay out a checkpoint a command writes (convert's and
// import's): --mesh, --devices, --num-devices, then --rules or --best-effort;
// and --dtype's float casts.
#pragma once

#include <optional>
#include <string>

#include "reshard/layout/dtype.h"
#include "reshard/pipelines/layout_rules.h"

namespace CLI {
class App;
}

namespace reshard::cli {

// The raw text of the flags, as given.
struct CheckpointLayoutFlags {
  std::string mesh;
  std::string devices;
  std::string num_devices;
  std::string rules;
  std::string best_effort;
  bool strict_rules = false;

  // Whether any flag but --mesh was given (they make sense only with it).
  bool any_besides_mesh() const;
};

// Adds the six flags to `command`, bound to `flags` (which must outlive
// parsing); `mesh_help` says what --mesh does for this command.
void add_checkpoint_layout_flags(CLI::App& command, CheckpointLayoutFlags& flags, const std::string& mesh_help);

// The layout the flags describe over a job of `processes`: exactly one of
// --rules FILE and --best-effort AXIS. Error(kParse) naming the flag at
// fault; Error(kIo) when the rules file cannot be read.
CheckpointLayout checkpoint_layout_from_flags(const CheckpointLayoutFlags& flags, int processes);

// --dtype TEXT: f32, f16 or bf16 (nullopt when empty); Error(kParse) otherwise.
std::optional<DType> float_cast_from_flag(const std::string& text);

}  // namespace reshard::cli
