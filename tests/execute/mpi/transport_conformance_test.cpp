// The transport conformance suite (tests/execute/support), run on
// MpiTransport by every rank of the mpirun job: the same cases the in-process
// transport passes.
#include <gtest/gtest.h>

#include "execute/support/transport_suite.h"
#include "mpi_side_channel.h"
#include "mpi_world.h"

namespace reshard::testing {
namespace {

class MpiConformance : public MpiTest {
 public:
  explicit MpiConformance(TransportCase test_case) : case_(std::move(test_case)) {}
  void TestBody() override {
    MpiSideChannel side(MPI_COMM_WORLD);
    case_.run(world_transport(), side);
  }

 private:
  TransportCase case_;
};

// Registered before main() runs the tests, one test per case.
const bool registered = [] {
  for (TransportCase& test_case : transport_cases()) {
    ::testing::RegisterTest("MpiTransportConformance", test_case.name.c_str(), nullptr, nullptr, __FILE__,
                            __LINE__, [test_case]() -> MpiTest* { return new MpiConformance(test_case); });
  }
  return true;
}();

}  // namespace
}  // namespace reshard::testing
