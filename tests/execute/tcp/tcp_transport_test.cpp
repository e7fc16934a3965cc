// TcpTransport: the conformance suite every transport passes, on ranks as
// threads and as processes started without a launcher; the rendezvous's
// refusals and timeouts; and how a job ends when a peer fails, dies, goes
// silent or is the coordinator.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <latch>
#include <thread>

#include <fmt/format.h>

#include "execute/launcher_env.h"
#include "execute/support/file_side_channel.h"
#include "execute/support/side_channel.h"
#include "execute/support/transport_suite.h"
#include "execute/tcp/socket.h"
#include "execute/support/tcp_job.h"
#include "reshard/layout/error.h"
#include "support/temp_dir.h"

namespace reshard::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using execute_detail::choose_launcher;
using execute_detail::LauncherChoice;
using execute_detail::process_env;
using execute_detail::TransportKind;

// --- the suite, on threads -----------------------------------------------

class TcpThreadsConformance : public ::testing::TestWithParam<int> {};

TEST_P(TcpThreadsConformance, EveryCase) {
  for (const TransportCase& test_case : transport_cases()) {
    SCOPED_TRACE(test_case.name);
    ThreadSideChannel side(GetParam());
    run_tcp_threads(GetParam(), [&](TcpTransport& transport) { test_case.run(transport, side); });
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TcpThreadsConformance, ::testing::Values(1, 2, 4));

// --- the suite, on processes -------------------------------------------------

// In a child (RESHARD_TCP_CHILD set), the job as its environment describes it.
std::unique_ptr<TcpTransport> child_transport() {
  const LauncherChoice choice = choose_launcher(TransportKind::kTcp, false, process_env());
  TcpTransportOptions options;
  options.rank = choice.rank;
  options.size = choice.size;
  options.coordinator = choice.coordinator;
  options.timeout = 20s;
  if (const char* timeout = std::getenv("RESHARD_TCP_TIMEOUT_MS")) options.timeout = std::chrono::milliseconds(std::atoi(timeout));
  return std::make_unique<TcpTransport>(options);
}

std::string outputs(const std::vector<ChildResult>& results) {
  std::string all;
  for (size_t rank = 0; rank < results.size(); ++rank) {
    all += fmt::format("--- rank {} (exit {}):\n{}\n", rank, results[rank].status, results[rank].output);
  }
  return all;
}

class TcpProcessConformance : public ::testing::TestWithParam<int> {};

TEST_P(TcpProcessConformance, EveryCase) {
  const TempDir side_folder;  // the processes' side channel (FileSideChannel)
  const auto results = run_tcp_processes(GetParam(), "TcpChild.Conformance",
                                         {"RESHARD_TCP_CHILD=1", "RESHARD_TCP_SIDE_DIR=" + side_folder.path().string()});
  for (const ChildResult& result : results) ASSERT_EQ(result.status, 0) << outputs(results);
  // Every case ran in every process: a child that skipped them all would also exit 0.
  for (const ChildResult& result : results) EXPECT_NE(result.output.find("[  PASSED  ] 1 test"), std::string::npos) << outputs(results);
}

INSTANTIATE_TEST_SUITE_P(Ranks, TcpProcessConformance, ::testing::Values(1, 2, 4));

// --- the rendezvous ------------------------------------------------------------

TEST(TcpRendezvous, NamesTheRanksThatNeverArrived) {
  try {
    run_tcp_threads(3, [](TcpTransport&) {}, 400ms);  // all three arrive: fine
  } catch (const Error& e) {
    FAIL() << e.what();
  }
  const int port = free_port();
  TcpTransportOptions options;
  options.size = 3;
  options.coordinator = fmt::format("127.0.0.1:{}", port);
  options.timeout = 600ms;
  std::thread rank1([&] {
    TcpTransportOptions one = options;
    one.rank = 1;
    EXPECT_THROW(TcpTransport{one}, Error);
  });
  try {
    TcpTransport{options};
    ADD_FAILURE() << "rank 0 did not notice rank 2's absence";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("rank(s) 2 did not arrive"), std::string::npos) << e.what();
  }
  rank1.join();
}

TEST(TcpRendezvous, NamesAnUnreachableCoordinator) {
  TcpTransportOptions options;
  options.rank = 1;
  options.size = 2;
  options.coordinator = fmt::format("127.0.0.1:{}", free_port());
  options.timeout = 300ms;
  try {
    TcpTransport{options};
    FAIL() << "joined a job whose coordinator is not there";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    const std::string what = e.what();
    const auto named = what.find("the coordinator (rank 0) at " + options.coordinator);
    EXPECT_NE(named, std::string::npos) << what;
    EXPECT_EQ(what.find(options.coordinator, named + 30 + options.coordinator.size()), std::string::npos)
        << "the address is named twice: " << what;
  }
}

TEST(TcpRendezvous, RejectsBadOptions) {
  TcpTransportOptions options;
  options.rank = 2;
  options.size = 2;
  EXPECT_THROW(TcpTransport{options}, Error);
  options.rank = 1;
  options.coordinator = "no-port-here";
  try {
    TcpTransport{options};
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("coordinator 'no-port-here'"), std::string::npos) << e.what();
  }
}

// A stray client (garbage, then one that claims a rank without the token)
// is refused and logged; the job forms all the same.
TEST(TcpRendezvous, RefusesStrayConnections) {
  const int port = free_port();
  const std::string coordinator = fmt::format("127.0.0.1:{}", port);
  TcpTransportOptions base;
  base.size = 2;
  base.coordinator = coordinator;
  base.timeout = 10s;
  base.job_token = "the-job's-secret";
  ::testing::internal::CaptureStderr();
  std::thread rank0([&] {
    TcpTransport transport(base);
    EXPECT_EQ(transport.all_gather({}).size(), 2u);
  });
  {
    using namespace tcp_detail;
    Socket garbage = connect_until(parse_host_port(coordinator, "test"), "the coordinator", "", Clock::now() + 5s);
    const char noise[] = "GET / HTTP/1.1\r\n\r\n";
    write_exactly(garbage, std::as_bytes(std::span(noise)), Clock::now() + 1s, "coordinator");
    // A real process of another job (another token) claiming rank 1.
    TcpTransportOptions impostor = base;
    impostor.rank = 1;
    impostor.job_token = "not-the-secret";
    impostor.timeout = 1500ms;
    EXPECT_THROW(TcpTransport{impostor}, Error);
  }
  TcpTransportOptions one = base;
  one.rank = 1;
  TcpTransport transport(one);
  EXPECT_EQ(transport.all_gather({}).size(), 2u);
  rank0.join();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("refused a connection from 127.0.0.1"), std::string::npos) << log;
  EXPECT_NE(log.find("does not hold this job's token"), std::string::npos) << log;
}

// --- failures -------------------------------------------------------------------

TEST(TcpFailure, AnAbortFailsEveryWaitNamingTheRankAndWhy) {
  const auto start = Clock::now();
  // The waiters stay in the job until both have failed: one that left at
  // once could be heard leaving by the other before rank 2's abort is.
  std::latch both_failed(2);
  run_tcp_threads(3, [&both_failed](TcpTransport& t) {
    const Tag base = t.begin_operation();
    t.barrier();
    if (t.rank() == 2) {
      t.abort("the disk is full");
      return;
    }
    std::vector<std::byte> in(16);
    auto receive = t.irecv((t.rank() + 1) % 2, base, in);  // never sent: only the abort ends it
    try {
      receive->wait();
      ADD_FAILURE() << "a wait outlived an abort";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kPeerFailed);
      EXPECT_NE(std::string(e.what()).find("rank 2 ("), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("the disk is full"), std::string::npos) << e.what();
    }
    both_failed.arrive_and_wait();
  }, 20s);
  EXPECT_LT(Clock::now() - start, 15s);  // not the 20 s timeout
}

TEST(TcpFailure, ASendLargerThanTheReceiveIsNamed) {
  run_tcp_threads(2, [](TcpTransport& t) {
    const Tag base = t.begin_operation();
    std::vector<std::byte> out(100), in(60);
    if (t.rank() == 0) {
      t.send(1, base, out);
    } else {
      try {
        t.recv(0, base, in);
        ADD_FAILURE() << "a message of the wrong size was taken";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kTransport);
        EXPECT_NE(std::string(e.what()).find("sent 100 bytes"), std::string::npos) << e.what();
      }
    }
    t.barrier();  // the connection carries on after the refused message
  });
}

// A request destroyed before its message came: the bytes go nowhere, and the
// next message on the tag reaches the next receive.
TEST(TcpWithdraw, AWithdrawnReceiveNeverTakesItsMessage) {
  run_tcp_threads(2, [](TcpTransport& t) {
    const Tag base = t.begin_operation();
    std::vector<std::byte> first(1 << 20, std::byte{1}), second(1 << 20, std::byte{2});
    if (t.rank() == 1) {
      auto withdrawn = t.irecv(0, base, first);
      withdrawn.reset();
    }
    t.barrier();
    if (t.rank() == 0) {
      t.send(1, base, second);
    } else {
      std::vector<std::byte> got(1 << 20);
      t.recv(0, base, got);
      EXPECT_EQ(got, second);
      EXPECT_EQ(first[0], std::byte{1});
    }
  });
}

// Owned messages of 64 KiB and more between processes of a host that may read
// each other's memory cross as one kernel copy: whether the receive is posted
// before or after the message is announced, and beside small ones on the
// same tag, in order.
void reads_across(TcpTransport& t) {
  const int to = (t.rank() + 1) % t.size(), from = (t.rank() + t.size() - 1) % t.size();
  if (t.size() > 1) {
    EXPECT_TRUE(t.reads_across(to)) << t.label_of(to);
  }
  const Tag base = t.begin_operation();
  const auto bytes_for = [](int sender, size_t size, int salt) {
    auto out = std::make_shared<std::vector<std::byte>>(size);
    for (size_t i = 0; i < size; ++i) (*out)[i] = static_cast<std::byte>((i * 7 + static_cast<size_t>(sender) * 13 + static_cast<size_t>(salt)) & 0xff);
    return out;
  };
  const size_t sizes[] = {size_t{3} << 20, 100, (size_t{64} << 10) + 1};
  std::vector<std::shared_ptr<std::vector<std::byte>>> out, in;
  std::vector<std::unique_ptr<Request>> requests;
  // The first receive is posted before the barrier, the others after the sends.
  in.push_back(std::make_shared<std::vector<std::byte>>(sizes[0]));
  requests.push_back(t.irecv_owned(from, base, *in[0], in[0]));
  t.barrier();
  for (int i = 0; i < 3; ++i) {
    out.push_back(bytes_for(t.rank(), sizes[i], i));
    requests.push_back(t.isend_owned(to, base, *out.back(), out.back()));
  }
  t.barrier();
  for (int i = 1; i < 3; ++i) {
    in.push_back(std::make_shared<std::vector<std::byte>>(sizes[i]));
    requests.push_back(t.irecv_owned(from, base, *in.back(), in.back()));
  }
  for (auto& request : requests) request->wait();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*in[static_cast<size_t>(i)], *bytes_for(from, sizes[i], i)) << "message " << i;
}

TEST(TcpSameHost, OwnedMessagesAreReadAcross) { run_tcp_threads(3, reads_across); }

TEST(TcpSameHost, SingleCopyOffSendsThroughTheSockets) {
  const int port = free_port();
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([rank, port] {
      TcpTransportOptions options;
      options.rank = rank;
      options.size = 2;
      options.coordinator = fmt::format("127.0.0.1:{}", port);
      options.timeout = 20s;
      options.single_copy = rank == 0;  // one side unwilling: the pair is not
      TcpTransport transport(options);
      EXPECT_FALSE(transport.reads_across(1 - rank));
    });
  }
  for (auto& rank : ranks) rank.join();
}

// Child processes' tests (registered only in a child): the suite, and the
// failures only a real process can show.
void child_conformance() {
  auto transport = child_transport();
  const char* side_folder = std::getenv("RESHARD_TCP_SIDE_DIR");
  ASSERT_NE(side_folder, nullptr) << "the parent names the side channel's folder";
  FileSideChannel side(side_folder, transport->size());
  for (const TransportCase& test_case : transport_cases()) {
    SCOPED_TRACE(test_case.name);
    test_case.run(*transport, side);
  }
  SCOPED_TRACE("ReadsAcross");
  reads_across(*transport);
}

// Rank 1 dies (as kill -9 would leave it) or stops (SIGSTOP: a hung host)
// while rank 0 waits on it; rank 0 must fail naming it, within the timeout.
void child_peer_dies_or_stops(bool stop) {
  auto transport = child_transport();
  const Tag base = transport->begin_operation();
  const pid_t me = ::getpid();
  const auto pids = transport->all_gather(std::as_bytes(std::span(&me, 1)));
  if (transport->rank() == 1) {
    if (stop) ::raise(SIGSTOP);
    ::_exit(0);  // no destructor, no goodbye: as a killed process
  }
  std::vector<std::byte> in(8);
  const auto start = Clock::now();
  try {
    transport->recv(1, base, in);
    ADD_FAILURE() << "rank 0 waited out a peer that is gone";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), stop ? ErrorCode::kTimeout : ErrorCode::kPeerFailed) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1 ("), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:"), std::string::npos) << e.what();
    std::puts(e.what());
  }
  EXPECT_LT(Clock::now() - start, transport->timeout() + 5s);
  pid_t stopped = 0;
  std::memcpy(&stopped, pids[1].data(), sizeof stopped);
  if (stop) ::kill(stopped, SIGKILL);
}

// Rank 0, the coordinator, dies; rank 1 waits on it and names it as such.
void child_coordinator_dies() {
  auto transport = child_transport();
  const Tag base = transport->begin_operation();
  transport->barrier();
  if (transport->rank() == 0) ::_exit(0);
  std::vector<std::byte> in(8);
  try {
    transport->recv(0, base, in);
    ADD_FAILURE() << "rank 1 waited out the coordinator";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPeerFailed);
    EXPECT_NE(std::string(e.what()).find("the coordinator, rank 0 ("), std::string::npos) << e.what();
  }
}

const bool child_tests_registered = [] {
  if (std::getenv("RESHARD_TCP_CHILD") == nullptr) return false;
  const auto add = [](const char* name, void (*body)()) {
    struct Body : ::testing::Test {
      explicit Body(void (*f)()) : f_(f) {}
      void TestBody() override { f_(); }
      void (*f_)();
    };
    ::testing::RegisterTest("TcpChild", name, nullptr, nullptr, __FILE__, __LINE__,
                            [body]() -> ::testing::Test* { return new Body(body); });
  };
  add("Conformance", child_conformance);
  add("PeerDies", [] { child_peer_dies_or_stops(false); });
  add("PeerStops", [] { child_peer_dies_or_stops(true); });
  add("CoordinatorDies", child_coordinator_dies);
  return true;
}();

void expect_rank_passes(const std::vector<ChildResult>& results, size_t rank) {
  ASSERT_GT(results.size(), rank);
  EXPECT_EQ(results[rank].status, 0) << outputs(results);
  EXPECT_NE(results[rank].output.find("[  PASSED  ] 1 test"), std::string::npos) << outputs(results);
}

TEST(TcpFailure, AKilledPeerFailsTheWaitOnItAtOnce) {
  const auto start = Clock::now();
  const auto results = run_tcp_processes(2, "TcpChild.PeerDies", {"RESHARD_TCP_CHILD=1", "RESHARD_TCP_TIMEOUT_MS=30000"});
  expect_rank_passes(results, 0);
  EXPECT_LT(Clock::now() - start, 25s) << "the dead peer was found by the timeout, not its closed connection";
}

TEST(TcpFailure, ASilentPeerFailsTheWaitWithinTheTimeout) {
  const auto results = run_tcp_processes(2, "TcpChild.PeerStops", {"RESHARD_TCP_CHILD=1", "RESHARD_TCP_TIMEOUT_MS=1500"});
  expect_rank_passes(results, 0);
}

TEST(TcpFailure, TheCoordinatorsLossIsNamedAsSuch) {
  const auto results = run_tcp_processes(2, "TcpChild.CoordinatorDies", {"RESHARD_TCP_CHILD=1"});
  expect_rank_passes(results, 1);
}

}  // namespace
}  // namespace reshard::testing
