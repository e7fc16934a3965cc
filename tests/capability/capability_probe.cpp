// Probes for capability_test.cpp, which runs this binary with and without
// RESHARD_REQUIRE_ALL_CAPABILITIES=1 (not a test of its own: one probe fails
// by design there).
#include <gtest/gtest.h>

#include "support/capability.h"

namespace reshard::testing {
namespace {

TEST(CapabilityProbe, LacksACapability) {
  const bool missing = true;
  if (missing) RESHARD_SKIP_WITHOUT("a capability no machine has") << "probe's reason";
  ADD_FAILURE() << "never reached";
}

TEST(CapabilityProbe, SkipsForAnotherReason) { GTEST_SKIP() << "not a capability"; }

}  // namespace
}  // namespace reshard::testing
