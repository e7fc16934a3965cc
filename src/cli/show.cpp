#include <CLI/CLI.hpp>

#include "reshard/cli/commands.h"

namespace reshard::cli {
void add_show_command(CLI::App& app) { app.add_subcommand("show", "Show which device holds which slice"); }
}  // namespace reshard::cli
