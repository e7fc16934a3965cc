// RESHARD_SKIP_WITHOUT: a skip on an ordinary machine, a failure where
// RESHARD_REQUIRE_ALL_CAPABILITIES=1 says the machine has every capability.
// The probes (capability_probe.cpp) run in a child process, with and without
// the setting.
#include "support/capability.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace reshard::testing {
namespace {

struct ProbeRun {
  int exit_code;
  std::string output;
};

// The probe binary, running only the probe `name`, with `setting` (or
// without the variable where it is null).
ProbeRun run_probe(const char* name, const char* setting) {
  std::string command = "env -u RESHARD_REQUIRE_ALL_CAPABILITIES ";
  if (setting != nullptr) command += std::string("RESHARD_REQUIRE_ALL_CAPABILITIES=") + setting + " ";
  command += std::string(RESHARD_CAPABILITY_PROBE) + " --gtest_filter=CapabilityProbe." + name + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  ProbeRun run{0, ""};
  std::array<char, 4096> chunk{};
  for (size_t n; (n = std::fread(chunk.data(), 1, chunk.size(), pipe)) > 0;) run.output.append(chunk.data(), n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(Capability, AMissingCapabilitySkipsOnAnOrdinaryMachine) {
  for (const char* setting : {static_cast<const char*>(nullptr), "0", ""}) {
    const ProbeRun run = run_probe("LacksACapability", setting);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("[  SKIPPED ] CapabilityProbe.LacksACapability"), std::string::npos)
        << run.output;
    EXPECT_NE(run.output.find("skipped for want of a capability no machine has"), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("probe's reason"), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("never reached"), std::string::npos) << run.output;
  }
}

TEST(Capability, AMissingCapabilityFailsWhereEveryCapabilityIsRequired) {
  const ProbeRun run = run_probe("LacksACapability", "1");
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[  FAILED  ] CapabilityProbe.LacksACapability"), std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("[  SKIPPED ]"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("RESHARD_REQUIRE_ALL_CAPABILITIES=1 says this machine has a capability no machine has"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("probe's reason"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("never reached"), std::string::npos) << run.output;
}

TEST(Capability, AnotherSkipStaysASkipWhereEveryCapabilityIsRequired) {
  const ProbeRun run = run_probe("SkipsForAnotherReason", "1");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[  SKIPPED ] CapabilityProbe.SkipsForAnotherReason"), std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace reshard::testing
