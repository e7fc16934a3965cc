// A library caller survives a peer's failure: under mpirun, the last rank
// fails in the middle of an exchange; every survivor's error names it; then
// all ranks carry on with a new transport and reshard correctly, and what the
// failed exchange left in MPI's hands is released once MPI is done with it.
// The sanitizer build runs this too: no buffer may be freed under MPI.
#include <chrono>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "execute/mpi/orphans.h"
#include "execute/support/faulty_transport.h"
#include "execute/support/reference_arrays.h"
#include "mpi_world.h"
#include "reshard/execute/operations.h"

namespace reshard {
namespace {

using namespace std::chrono_literals;
using testing::MpiTest;
using testing::world_transport;

class FailureRecovery : public MpiTest {
 protected:
  Topology topology() const { return Topology::uniform(8, world_transport().size()); }
  const Shape shape_{512, 1024};  // 2 MiB of f32: many messages between every pair
  const NamedSharding rows_{Mesh({{"x", 8}}, {0, 1, 2, 3, 4, 5, 6, 7}), PartitionSpec({{"x"}})};
  const NamedSharding columns_{Mesh({{"x", 8}}, {7, 5, 3, 1, 6, 4, 2, 0}), PartitionSpec({{}, {"x"}})};
};

TEST_F(FailureRecovery, SurvivorsNameTheFailedRankAndCarryOnWithANewTransport) {
  const int size = world_transport().size();
  if (size < 2) GTEST_SKIP() << "needs a peer to fail";
  const int failing = size - 1;
  ExecuteOptions options;
  // Messages both below and above Open MPI's eager limit, so that the failure
  // leaves matched receives and rendezvous sends in MPI's hands.
  options.message_bytes = 96 << 10;
  options.max_bytes_in_flight = 256 << 10;
  {
    MpiTransport first(MPI_COMM_WORLD);
    testing::FaultyTransport faulty(first, first.rank() == failing ? 1 : 1 << 30);
    const ShardedArray a = testing::reference_array(shape_, DType::kF32, rows_, topology(), first.rank(), 3);
    std::string message;
    ErrorCode code = ErrorCode::kInvalidArgument;
    try {
      reshard_array(a, columns_, faulty, options);
      ADD_FAILURE() << "the exchange did not fail";
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    }
    if (first.rank() == failing) {
      EXPECT_EQ(code, ErrorCode::kTransport) << message;
      EXPECT_NE(message.find("injected fault"), std::string::npos) << message;
    } else {
      EXPECT_EQ(code, ErrorCode::kPeerFailed) << message;
      EXPECT_NE(message.find(fmt::format("peer rank {} failed", failing)), std::string::npos) << message;
    }
  }  // the failed transport, its arrays and its buffers go; MPI may still hold some
  MpiTransport second(MPI_COMM_WORLD);
  for (const uint64_t salt : {uint64_t{11}, uint64_t{12}}) {
    const ShardedArray a = testing::reference_array(shape_, DType::kF32, rows_, topology(), second.rank(), salt);
    EXPECT_TRUE(testing::matches_reference(reshard_array(a, columns_, second, options), salt));
  }
  // MPI finishes what the failed exchange left it; then its memory goes back.
  // Every rank loops until all are clear (or one gives up): a collective decision.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (true) {
    const uint64_t left = mpi_detail::Orphans::instance().size();
    const bool give_up = std::chrono::steady_clock::now() > deadline;
    uint64_t total = 0;
    bool anyone_gave_up = false;
    for (const auto& part : second.all_gather(std::vector<std::byte>{std::byte{left > 0}, std::byte{give_up}})) {
      total += part[0] != std::byte{0} ? 1u : 0u;
      anyone_gave_up = anyone_gave_up || part[1] != std::byte{0};
    }
    if (total == 0 || anyone_gave_up) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(mpi_detail::Orphans::instance().size(), 0u) << "transfers of the failed exchange never completed";
}

}  // namespace
}  // namespace reshard
