// main() of the tests that run under mpirun: every rank runs every test, and
// all ranks agree on each verdict and on the exit status.
#include <cstring>
#include <iostream>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "mpi_world.h"
#include "reshard/execute/mpi/mpi_session.h"
#include "support/seed.h"

namespace reshard::testing {
namespace {

MpiTransport* g_world = nullptr;

// On ranks other than 0, only failures are printed, each marked with its rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::cerr << fmt::format("[rank {}] {}:{}: {}\n", rank_, result.file_name() ? result.file_name() : "?",
                             result.line_number(), result.message());
  }

 private:
  int rank_;
};

std::vector<std::byte> one_byte(bool value) { return {value ? std::byte{1} : std::byte{0}}; }

}  // namespace

MpiTransport& world_transport() { return *g_world; }

uint64_t shared_test_seed() {
  MpiTransport& world = world_transport();
  uint64_t seed = world.rank() == 0 ? test_seed() : 0;
  std::vector<std::byte> mine(sizeof seed);
  std::memcpy(mine.data(), &seed, sizeof seed);
  const auto all = world.all_gather(mine);
  std::memcpy(&seed, all[0].data(), sizeof seed);
  return seed;
}

void agree_on_result() {
  MpiTransport& world = world_transport();
  const bool failed_here = ::testing::Test::HasFailure();
  const auto verdicts = world.all_gather(one_byte(failed_here));
  std::vector<int> failed;
  for (size_t r = 0; r < verdicts.size(); ++r) {
    if (verdicts[r][0] != std::byte{0}) failed.push_back(static_cast<int>(r));
  }
  if (!failed_here && !failed.empty()) ADD_FAILURE() << fmt::format("rank(s) {} failed this test", fmt::join(failed, ", "));
}

uint64_t sum_over_ranks(Transport& t, uint64_t value) {
  std::vector<std::byte> mine(sizeof value);
  std::memcpy(mine.data(), &value, sizeof value);
  uint64_t total = 0;
  for (const auto& theirs : t.all_gather(mine)) {
    uint64_t v = 0;
    std::memcpy(&v, theirs.data(), sizeof v);
    total += v;
  }
  return total;
}

}  // namespace reshard::testing

int main(int argc, char** argv) {
  reshard::MpiSession session;
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = reshard::MpiSession::world_rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new reshard::testing::RankFailurePrinter(rank));
  }
  int status = 0;
  {
    reshard::MpiTransportOptions options;
    options.timeout = std::chrono::seconds(30);
    reshard::MpiTransport world(MPI_COMM_WORLD, options);
    reshard::testing::g_world = &world;
    const bool failed_here = RUN_ALL_TESTS() != 0;
    // Every rank exits with the job's verdict, whichever rank failed.
    const auto verdicts = world.all_gather(reshard::testing::one_byte(failed_here));
    for (const auto& v : verdicts) status |= v[0] != std::byte{0} ? 1 : 0;
    reshard::testing::g_world = nullptr;
  }
  return status;
}
