// --timeout SECONDS: every data-moving command takes it, and only a positive number.
#include <string>

#include <gtest/gtest.h>

#include "cli/support/run_reshard.h"

namespace reshard::testing {
namespace {

TEST(TimeoutOption, DataMovingCommandsTakeIt) {
  for (const std::string command : {"convert", "bench"}) {
    const CommandResult help = run_reshard({command, "--help"});
    EXPECT_EQ(help.exit_code, 0) << help.err;
    EXPECT_NE(help.out.find("--timeout"), std::string::npos) << command << ":\n" << help.out;
    EXPECT_NE(help.out.find("alive but slow is waited for"), std::string::npos) << help.out;
  }
}

TEST(TimeoutOption, ANonPositiveOrNonNumericTimeoutIsAUsageError) {
  TempFolder folder;
  for (const std::string value : {"0", "-3", "soon"}) {
    const CommandResult run = run_reshard({"convert", (folder / "a.safetensors").string(),
                                           (folder / "b.safetensors").string(), "--timeout", value});
    EXPECT_EQ(run.exit_code, 2) << value << ": " << run.err;
    EXPECT_NE(run.err.find("--timeout"), std::string::npos) << run.err;
  }
}

TEST(TimeoutOption, APositiveTimeoutIsAccepted) {
  TempFolder folder;
  // The source does not exist: the command fails (1), but not on the option (2).
  const CommandResult run = run_reshard({"convert", (folder / "missing.safetensors").string(),
                                         (folder / "b.safetensors").string(), "--timeout", "2.5"});
  EXPECT_EQ(run.exit_code, 1) << run.err;
}

}  // namespace
}  // namespace reshard::testing
