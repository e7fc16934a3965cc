// One function per subcommand: each adds itself to the app and sets its callback.
#pragma once

namespace CLI {
class App;
}

namespace reshard::cli {

void add_show_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_verify_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_merge_lora_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_demo_command(CLI::App& app);

}  // namespace reshard::cli
