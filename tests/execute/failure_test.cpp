// A failing process must make the others stop with an error, soon, never hang.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include <gtest/gtest.h>

#include "execute/support/faulty_transport.h"
#include "execute/support/rank_threads.h"
#include "execute/support/reference_arrays.h"
#include "execute/support/wait_watch.h"
#include "reshard/execute/operations.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

using namespace std::chrono_literals;

using testing::FaultyTransport;

class Failures : public ::testing::Test {
 protected:
  const Topology topology_ = Topology::uniform(8, 4);
  const Shape shape_{64, 256};
  const NamedSharding rows_{Mesh({{"x", 8}}, {0, 1, 2, 3, 4, 5, 6, 7}), PartitionSpec({{"x"}})};
  const NamedSharding columns_{Mesh({{"x", 8}}, {7, 5, 3, 1, 6, 4, 2, 0}), PartitionSpec({{}, {"x"}})};
};

TEST_F(Failures, OneRankFailingMidTransferStopsTheOthersQuickly) {
  ExecuteOptions options;
  options.message_bytes = 512;  // many messages, so the fault lands mid-transfer
  options.max_bytes_in_flight = 1024;
  std::vector<ErrorCode> codes(4, ErrorCode::kInvalidArgument);
  std::vector<std::string> messages(4);
  try {
    testing::run_ranks(
        4,
        [&](Transport& t) {
          const ShardedArray a = testing::reference_array(shape_, DType::kF32, rows_, topology_, t.rank(), 5);
          FaultyTransport faulty(t, t.rank() == 2 ? 3 : 1 << 30);
          try {
            reshard_array(a, columns_, faulty, options);
          } catch (const Error& e) {
            codes[static_cast<size_t>(t.rank())] = e.code();
            messages[static_cast<size_t>(t.rank())] = e.what();
            throw;
          }
        },
        30s);
    FAIL() << "no rank failed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTransport) << e.what();  // the root cause, not a peer's report
  }
  // Told, not timed out (no rank is silent, so none can time out here): a
  // rank that was never told would hang until ctest's timeout ends the test.
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(codes[static_cast<size_t>(r)], ErrorCode::kPeerFailed) << "rank " << r << ": " << messages[static_cast<size_t>(r)];
    EXPECT_NE(messages[static_cast<size_t>(r)].find("process 2"), std::string::npos) << messages[static_cast<size_t>(r)];
  }
}

TEST_F(Failures, ARankThatLeavesWithoutTakingPartIsNamedAtOnce) {
  std::vector<ErrorCode> codes(2, ErrorCode::kInvalidArgument);
  std::string message;
  EXPECT_THROW(testing::run_ranks(
                   2,
                   [&](Transport& t) {
                     if (t.rank() == 1) return;  // skips the collective operation: run_ranks has it leave
                     const Topology two = Topology::uniform(2, 2);
                     const NamedSharding src(Mesh({{"x", 2}}, {0, 1}), PartitionSpec({{"x"}}));
                     const NamedSharding dst(Mesh({{"x", 2}}, {1, 0}), PartitionSpec({{"x"}}));
                     try {
                       reshard_array(testing::reference_array({4, 4}, DType::kF32, src, two, 0, 1), dst, t);
                     } catch (const Error& e) {
                       codes[0] = e.code();
                       message = e.what();
                       throw;
                     }
                   },
                   30s),
               Error);
  EXPECT_EQ(codes[0], ErrorCode::kPeerFailed) << message;
  // Named as gone, not waited for: a wait on a rank that is not silent never
  // times out, so without its leaving this would hang instead.
  EXPECT_NE(message.find("process 1 left the job"), std::string::npos) << message;
}

TEST_F(Failures, ASilentRankIsReportedWithinTheBoundNamingIt) {
  // Rank 1 stops answering as a hung host would, mid-reshard: the others must
  // give up on it after the bound (300 ms here), not wait forever. It stays
  // silent until all three have given up, however long the machine takes to
  // get there, so their errors come from its silence, never from its waking
  // (a minute is a hang guard only: it then fails, and no one timed out).
  InProcessGroup group(4, 300ms);
  std::vector<ErrorCode> codes(4, ErrorCode::kInvalidArgument);
  std::vector<std::string> messages(4);
  std::mutex mutex;
  std::condition_variable gave_up;
  int others_given_up = 0;
  ExecuteOptions options;
  options.message_bytes = 512;
  options.max_bytes_in_flight = 1024;
  EXPECT_THROW(testing::run_ranks(group,
                                  [&](Transport& t) {
                                    const auto r = static_cast<size_t>(t.rank());
                                    const ShardedArray a =
                                        testing::reference_array(shape_, DType::kF32, rows_, topology_, t.rank(), 5);
                                    // Hung, not failed: it tells nobody, for longer than the bound.
                                    FaultyTransport hangs(t, t.rank() == 1 ? 2 : 1 << 30, [&] {
                                      group.go_silent(1);
                                      std::unique_lock lock(mutex);
                                      gave_up.wait_for(lock, 60s, [&] { return others_given_up == 3; });
                                    });
                                    try {
                                      reshard_array(a, columns_, hangs, options);
                                    } catch (const Error& e) {
                                      codes[r] = e.code();
                                      messages[r] = e.what();
                                      if (r != 1) {
                                        std::lock_guard lock(mutex);
                                        ++others_given_up;
                                        gave_up.notify_all();
                                      }
                                      throw;
                                    }
                                  }),
               Error);
  for (int r : {0, 2, 3}) {
    const auto i = static_cast<size_t>(r);
    // Rank 1's silence, or a peer that reported it first.
    EXPECT_TRUE(codes[i] == ErrorCode::kTimeout || codes[i] == ErrorCode::kPeerFailed) << messages[i];
    EXPECT_NE(messages[i].find("process 1"), std::string::npos) << messages[i];
    if (codes[i] == ErrorCode::kTimeout) {
      EXPECT_NE(messages[i].find("(timeout 300 ms)"), std::string::npos) << messages[i];
    }
  }
  const bool someone_timed_out = std::count(codes.begin(), codes.end(), ErrorCode::kTimeout) > 0;
  EXPECT_TRUE(someone_timed_out) << messages[0];
}

TEST_F(Failures, ARankSlowerThanTheBoundIsWaitedFor) {
  // The bound is 200 ms; rank 3, alive all along, turns up only once another
  // rank has been blocked on one wait for five bounds, by that rank's own
  // entry into it: slower than the bound by cause, however the machine
  // schedules the threads.
  constexpr auto kBound = 200ms;
  testing::WaitWatch watch;
  testing::run_ranks(
      4,
      [&](Transport& t) {
        // A rank that ends, even by a failed check, lets rank 3 go.
        const std::shared_ptr<void> ends(nullptr, [&](void*) { watch.end(); });
        testing::WatchedTransport watched(t, watch);
        const ShardedArray a = testing::reference_array(shape_, DType::kF32, rows_, topology_, t.rank(), 5);
        if (t.rank() == 3) watch.await_a_wait_of(5 * kBound, 3);
        const ShardedArray b = reshard_array(a, columns_, watched);
        EXPECT_TRUE(testing::matches_reference(b, 5));
      },
      kBound);
}

TEST_F(Failures, SurvivorsOfAFailureRunFurtherOperationsCleanly) {
  // Rank 2 fails mid-exchange; every rank catches the error, and the job
  // carries on with a new group: nothing from the failed exchange may touch
  // the new one's buffers (the sanitizer build checks), and the results are right.
  ExecuteOptions options;
  options.message_bytes = 512;
  options.max_bytes_in_flight = 1024;
  std::vector<std::string> messages(4);
  {
    InProcessGroup failing(4, 30s);
    testing::run_ranks(failing, [&](Transport& t) {
      const ShardedArray a = testing::reference_array(shape_, DType::kF32, rows_, topology_, t.rank(), 5);
      FaultyTransport faulty(t, t.rank() == 2 ? 3 : 1 << 30);
      try {
        reshard_array(a, columns_, faulty, options);
        ADD_FAILURE() << "rank " << t.rank() << ": the exchange did not fail";
      } catch (const Error& e) {
        messages[static_cast<size_t>(t.rank())] = e.what();
      }
    });
  }
  for (int r : {0, 1, 3}) {
    EXPECT_NE(messages[static_cast<size_t>(r)].find("process 2 failed"), std::string::npos)
        << messages[static_cast<size_t>(r)];
  }
  testing::run_ranks(4, [&](Transport& t) {
    for (const uint64_t salt : {uint64_t{7}, uint64_t{8}}) {
      const ShardedArray a = testing::reference_array(shape_, DType::kF32, rows_, topology_, t.rank(), salt);
      EXPECT_TRUE(testing::matches_reference(reshard_array(a, columns_, t, options), salt));
    }
  });
}

TEST_F(Failures, ProcessesRunningDifferentPlansFailInsteadOfMixingMessages) {
  const Topology four = Topology::uniform(4, 2);
  const NamedSharding src(Mesh({{"x", 4}}, {0, 1, 2, 3}), PartitionSpec({{"x"}}));
  try {
    testing::run_ranks(2, [&](Transport& t) {
      // Rank 1 asks for another target layout than rank 0.
      const std::vector<DeviceId> order = t.rank() == 0 ? std::vector<DeviceId>{3, 2, 1, 0} : std::vector<DeviceId>{2, 3, 0, 1};
      const NamedSharding dst(Mesh({{"x", 4}}, order), PartitionSpec({{"x"}}));
      reshard_array(testing::reference_array({8, 4}, DType::kF32, src, four, t.rank(), 1), dst, t);
    });
    FAIL() << "mismatched plans went unnoticed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("different plan"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace reshard
