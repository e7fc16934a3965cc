// The copy threads an operation uses: the host's cores shared among the job's processes on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "reshard/execute/executor.h"
#include "reshard/execute/in_process_transport.h"
#include "reshard/execute/transport_calls.h"

namespace reshard {
namespace {

int cores() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

TEST(ThreadBudget, ByDefaultTheHostsCoresAreSharedAmongItsProcesses) {
  const ExecuteOptions options;
  EXPECT_EQ(options.copy_threads(), cores());
  EXPECT_EQ(options.copy_threads(2), std::max(1, cores() / 2));
  // More processes than cores: each copies on its calling thread alone.
  EXPECT_EQ(options.copy_threads(cores() + 1), 1);
  EXPECT_EQ(options.copy_threads(0), cores()) << "a transport that knows nothing counts as alone";
}

TEST(ThreadBudget, AnExplicitCountIsKeptWhateverTheHostHolds) {
  ExecuteOptions options;
  options.threads = 3;
  EXPECT_EQ(options.copy_threads(), 3);
  EXPECT_EQ(options.copy_threads(64), 3);
}

TEST(ThreadBudget, InProcessEveryRankSharesThisHost) {
  InProcessGroup group(4);
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(processes_on_this_host(group.transport(rank)), 4);
}

}  // namespace
}  // namespace reshard
