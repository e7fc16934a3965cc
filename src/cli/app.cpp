#include "cli/app.h"

#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/python_handoff.h"
#include "reshard/layout/error.h"
#include "reshard/storage/pending_uploads.h"

namespace reshard::cli {
namespace {

constexpr const char* kDescription =
    "reshard: move sharded tensors between device layouts, processes, hosts and files.\n"
    "\n"
    "Examples:\n"
    "  reshard demo                 # the whole job on a small model, checked bit for bit\n"
    "  reshard show --mesh data=4,model=4 --spec 'None,data' --shape 8,4096\n"
    "  reshard plan --shape 32,8,4096 --dtype f32 --src-mesh data=4,model=4 \\\n"
    "      --src-spec 'None,None,data' --dst-mesh data=16 --dst-spec 'data' --processes 4\n";

// Parse errors (bad flag values) are usage errors; everything else failed.
int exit_code_for(const Error& error) {
  return error.code() == ErrorCode::kParse ? kExitUsage : kExitFailed;
}

// One write per message: under mpirun, ranks' stderr lines must not interleave.
void print_error(const std::string& message) {
  const std::string line = "error: " + message + "\n";
  std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
  std::cerr.flush();
}

}  // namespace

int run(int argc, char** argv) {
  if (const std::optional<int> failed = hand_off_to_python(argc, argv)) return *failed;
  CLI::App app(kDescription, "reshard");
  app.require_subcommand(1);
  app.set_version_flag("--version", "reshard 0.1.0");
  add_show_command(app);
  add_plan_command(app);
  add_inspect_command(app);
  add_verify_command(app);
  add_convert_command(app);
  add_import_command(app);
  add_merge_lora_command(app);
  add_export_command(app);
  add_demo_command(app);
  add_bench_command(app);
  // mpirun ends every process of a job with SIGTERM when one fails: uploads
  // in flight are aborted first, so that no part stays behind.
  storage::abort_pending_uploads_on_termination();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(std::string(e.what()) + "\nrun 'reshard --help' or 'reshard COMMAND --help' for usage");
    return kExitUsage;
  } catch (const Error& e) {
    // The library names no flag (Python callers pass replace=True); the command line's is --force.
    print_error(e.code() == ErrorCode::kAlreadyExists ? std::string(e.what()) + " (use --force to replace it)"
                                                       : std::string(e.what()));
    return exit_code_for(e);
  } catch (const std::exception& e) {
    print_error(e.what());
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace reshard::cli
