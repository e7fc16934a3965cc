// `reshard export | inspect | convert SRC ...` where SRC is an Orbax, Levanter
// or JAX checkpoint: only the Python package reads those (through
// TensorStore, the library they are written with), so the same command line
// is handed to `python -m reshard.orbax`, with the interpreter installed
// beside this binary (or $RESHARD_PYTHON), under mpirun as well.
#pragma once

#include <optional>
#include <string>

namespace reshard::cli {

// Which of those checkpoints `source` is ("Orbax", "Levanter", "JAX"), from
// its own files; nullopt for anything else (reshard's own checkpoints, Hugging
// Face folders, safetensors files) or a source that cannot be looked at (the
// command itself then says why).
std::optional<std::string> foreign_checkpoint_kind(const std::string& source);

// Replaces this process by the Python reader when argv is such a command;
// returns only when it is not (nullopt) or the reader cannot be started (the
// exit code, after an error naming the exact command to run instead).
std::optional<int> hand_off_to_python(int argc, char** argv);

}  // namespace reshard::cli
