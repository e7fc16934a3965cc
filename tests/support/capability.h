// Skips for a capability the machine lacks (several ranks, pidfd_getfd,
// memory files, cross-memory attach, ...), which become failures where the
// machine is known to have them all: RESHARD_REQUIRE_ALL_CAPABILITIES=1, set
// by scripts/test.sh in CI and as root. A skip there would pass silently
// what the machine can run.
//
// Skips that are no missing capability (ASan changes peak memory; a test of
// two ranks in the one-rank run of an mpirun binary; an opt-out setting the
// run asked for) stay plain GTEST_SKIPs: the test command lists every skip.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace reshard::testing {

// True where RESHARD_REQUIRE_ALL_CAPABILITIES=1.
inline bool all_capabilities_required() {
  const char* value = std::getenv("RESHARD_REQUIRE_ALL_CAPABILITIES");
  return value != nullptr && std::string_view(value) == "1";
}

inline ::testing::TestPartResult::Type missing_capability_outcome() {
  return all_capabilities_required() ? ::testing::TestPartResult::kFatalFailure : ::testing::TestPartResult::kSkip;
}

inline std::string missing_capability_headline(std::string_view capability) {
  std::string line = all_capabilities_required()
                         ? "RESHARD_REQUIRE_ALL_CAPABILITIES=1 says this machine has " + std::string(capability) +
                               ", but it has not"
                         : "skipped for want of " + std::string(capability);
  return line;
}

}  // namespace reshard::testing

// In a test body, where `capability` (a phrase: "pidfd_getfd") is missing:
//   if (!mapped) RESHARD_SKIP_WITHOUT("pidfd_getfd") << "this kernel refuses it";
// skips with that message, or fails with it under RESHARD_REQUIRE_ALL_CAPABILITIES=1.
// (GTEST_SKIP's own expansion, with the outcome chosen when it runs.)
#define RESHARD_SKIP_WITHOUT(capability)                                                                    \
  return GTEST_MESSAGE_AT_(__FILE__, __LINE__, ::reshard::testing::missing_capability_headline(capability).c_str(), \
                           ::reshard::testing::missing_capability_outcome())
