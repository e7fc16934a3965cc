// The in-process transport: the shared conformance suite at 1, 2 and 4 ranks,
// then what only an in-process group does (failure marks, byte counts).
#include "reshard/execute/in_process_transport.h"

#include <chrono>
#include <latch>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "execute/support/rank_threads.h"
#include "execute/support/transport_suite.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

using namespace std::chrono_literals;
using testing::run_ranks;
using testing::TransportCase;

class TransportSuite : public ::testing::TestWithParam<std::tuple<TransportCase, int>> {};

TEST_P(TransportSuite, PassesOnInProcessGroup) {
  const auto& [transport_case, ranks] = GetParam();
  testing::ThreadSideChannel side(ranks);
  run_ranks(ranks, [&](Transport& t) { transport_case.run(t, side); });
}

INSTANTIATE_TEST_SUITE_P(InProcess, TransportSuite,
                         ::testing::Combine(::testing::ValuesIn(testing::transport_cases()), ::testing::Values(1, 2, 4)),
                         [](const auto& param_info) {
                           return std::get<0>(param_info.param).name + "_" + std::to_string(std::get<1>(param_info.param)) +
                                  "ranks";
                         });

// Runs `f`, returning the code and message of the reshard::Error it throws.
template <class F>
std::pair<ErrorCode, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  ADD_FAILURE() << "no error thrown";
  return {ErrorCode::kInvalidArgument, ""};
}

TEST(InProcessGroup, AbortFailsAPeersPendingReceiveNamingTheRank) {
  InProcessGroup group(2, 30s);
  // Rank 1 aborts once the receive is posted, not after a while: pending
  // whatever the machine's speed. It is not silent, so the receive cannot
  // time out: it fails on the abort, or hangs.
  std::latch posted(1);
  run_ranks(group, [&](Transport& t) {
    if (t.rank() == 1) {
      posted.wait();
      t.abort("disk on fire");
      return;
    }
    std::vector<std::byte> incoming(8);
    auto receive = t.irecv(1, 0, incoming);
    posted.count_down();
    const auto [code, message] = error_of([&] { receive->wait(); });
    EXPECT_EQ(code, ErrorCode::kPeerFailed);
    EXPECT_NE(message.find("process 1"), std::string::npos) << message;
    EXPECT_NE(message.find("disk on fire"), std::string::npos) << message;
  });
}

TEST(InProcessGroup, AbortFailsCollectivesAndLaterOperations) {
  InProcessGroup group(3, 30s);
  run_ranks(group, [&](Transport& t) {
    if (t.rank() == 2) {
      t.abort("gave up");
      return;
    }
    EXPECT_EQ(error_of([&] { t.barrier(); }).first, ErrorCode::kPeerFailed);
    const std::vector<std::byte> data(4);
    EXPECT_EQ(error_of([&] { t.send(1 - t.rank(), 5, data); }).first, ErrorCode::kPeerFailed);
  });
}

TEST(InProcessGroup, MismatchedSizesFailBothSides) {
  run_ranks(2, [](Transport& t) {
    std::vector<std::byte> buffer(t.rank() == 0 ? 10 : 12);
    const auto [code, message] = error_of([&] {
      if (t.rank() == 0) t.send(1, 4, buffer);
      else t.recv(0, 4, buffer);
    });
    EXPECT_EQ(code, ErrorCode::kTransport);
    EXPECT_NE(message.find("10 bytes"), std::string::npos) << message;
  });
}

TEST(InProcessGroup, CountsPointToPointBytesOnly) {
  InProcessGroup group(2);
  run_ranks(group, [](Transport& t) {
    t.all_gather(std::vector<std::byte>(100));
    std::vector<std::byte> buffer(t.rank() == 0 ? 300 : 0);
    if (t.rank() == 0) {
      t.send(1, 0, buffer);
    } else {
      std::vector<std::byte> incoming(300);
      t.recv(0, 0, incoming);
    }
  });
  EXPECT_EQ(group.bytes_sent(0), 300u);
  EXPECT_EQ(group.messages_sent(0), 1u);
  EXPECT_EQ(group.bytes_sent(1), 0u);
  EXPECT_EQ(group.bytes_received(1), 300u);
  EXPECT_EQ(group.bytes_received(0), 0u);
}

TEST(InProcessGroup, RejectsPeersOutsideTheGroup) {
  InProcessGroup group(2);
  std::vector<std::byte> buffer(4);
  EXPECT_EQ(error_of([&] { group.transport(0).isend(2, 0, buffer); }).first, ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { group.transport(0).irecv(-1, 0, buffer); }).first, ErrorCode::kInvalidArgument);
  EXPECT_THROW(InProcessGroup(0), Error);
}

TEST(InProcessGroup, AbandonedReceiveIsWithdrawnBeforeItsBufferGoes) {
  run_ranks(2, [](Transport& t) {
    if (t.rank() == 1) {
      {
        std::vector<std::byte> doomed(64);
        auto request = t.irecv(0, 1, doomed);
      }  // destroyed unanswered: the send below must not land in freed memory
      t.barrier();
      std::vector<std::byte> incoming(64);
      t.recv(0, 1, incoming);
      EXPECT_EQ(incoming, std::vector<std::byte>(64, std::byte{7}));
    } else {
      t.barrier();
      t.send(1, 1, std::vector<std::byte>(64, std::byte{7}));
    }
  });
}

TEST(RunRanks, RethrowsTheRootCauseNotThePeersFailures) {
  try {
    run_ranks(4, [](Transport& t) {
      if (t.rank() == 2) throw std::runtime_error("rank two broke");
      t.barrier();
    });
    FAIL() << "run_ranks did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank two broke");
  }
}

TEST(RunRanks, AnErrorComesBackNamingItsRankAndTheOthersStopAtOnce) {
  InProcessGroup group(3, std::chrono::hours(1));  // the others must not wait out a timeout
  try {
    group.run([](Transport& t) {
      if (t.rank() == 1) throw Error(ErrorCode::kMissingTensor, "tensor 'w' is missing");
      std::vector<std::byte> never(4);
      t.recv(1, 0, never);
    });
    FAIL() << "run did not rethrow";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kMissingTensor);
    EXPECT_STREQ(e.what(), "rank 1: tensor 'w' is missing");
  }
}

}  // namespace
}  // namespace reshard
