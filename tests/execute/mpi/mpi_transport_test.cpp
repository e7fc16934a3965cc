// MpiTransport's own behaviour under mpirun (the shared conformance suite
// covers what every transport must do; this covers what only MPI's does).
#include "reshard/execute/mpi/mpi_transport.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "mpi_world.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

using testing::MpiTest;
using testing::world_transport;
using namespace std::chrono_literals;

int next_rank(const Transport& t) { return (t.rank() + 1) % t.size(); }
int previous_rank(const Transport& t) { return (t.rank() + t.size() - 1) % t.size(); }

// Bytes that say who sent them and where they sit in the message.
std::vector<std::byte> pattern(int sender, size_t size) {
  std::vector<std::byte> out(size);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<std::byte>((i * 131 + static_cast<size_t>(sender) * 7) & 0xff);
  return out;
}

// Sends `bytes` round the ring on `t` and checks what arrives.
void ring_exchange(Transport& t, Tag tag, size_t bytes) {
  std::vector<std::byte> incoming(bytes);
  const std::vector<std::byte> outgoing = pattern(t.rank(), bytes);
  auto receive = t.irecv(previous_rank(t), tag, incoming);
  auto send = t.isend(next_rank(t), tag, outgoing);
  send->wait();
  receive->wait();
  EXPECT_EQ(incoming, pattern(previous_rank(t), bytes));
}

template <class F>
ErrorCode error_code_of(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message != nullptr) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "expected an Error";
  return ErrorCode::kInvalidArgument;
}

class MpiTransportTest : public MpiTest {};

TEST_F(MpiTransportTest, RankAndSizeAreTheWorlds) {
  MpiTransport& world = world_transport();
  int rank = -1;
  int size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(world.rank(), rank);
  EXPECT_EQ(world.size(), size);
}

TEST_F(MpiTransportTest, LargeMessagesTravelInSegmentsWithinTheInFlightBound) {
  MpiTransportOptions options;
  options.segment_bytes = 64 << 10;
  options.max_bytes_in_flight = 256 << 10;
  options.single_copy = false;  // MPI's segmented path is what is tested here
  MpiTransport t(MPI_COMM_WORLD, options);
  const Tag tag = t.begin_operation();
  ring_exchange(t, tag, (3 << 20) + 12345);  // not a multiple of the segment
  EXPECT_GT(t.peak_bytes_in_flight(), 2 * options.segment_bytes);  // it did pipeline
  // The budget, plus the one segment the second request may always post.
  EXPECT_LE(t.peak_bytes_in_flight(), options.max_bytes_in_flight + options.segment_bytes);
}

TEST_F(MpiTransportTest, EachRequestKeepsOneSegmentMovingEvenWithATinyBudget) {
  MpiTransportOptions options;
  options.segment_bytes = 32 << 10;
  options.max_bytes_in_flight = 1;  // only the always-allowed segment per request
  options.single_copy = false;  // MPI's segmented path is what is tested here
  MpiTransport t(MPI_COMM_WORLD, options);
  ring_exchange(t, t.begin_operation(), 1 << 20);
  EXPECT_LE(t.peak_bytes_in_flight(), 2 * options.segment_bytes);  // one send and one receive
}

TEST_F(MpiTransportTest, WaitingOnOneRequestFeedsTheOthers) {
  // Both sides wait on their send before their receive, with messages far
  // above the eager limit and one segment in flight: if a wait advanced only its
  // own request, neither receive would post its next segment and both would hang.
  MpiTransportOptions options;
  options.segment_bytes = 64 << 10;
  options.max_bytes_in_flight = 1;
  options.timeout = 10s;
  MpiTransport t(MPI_COMM_WORLD, options);
  const size_t bytes = 4 << 20;
  std::vector<std::byte> incoming(bytes);
  const auto outgoing = pattern(t.rank(), bytes);
  const Tag tag = t.begin_operation();
  const int peer = t.rank() ^ 1;
  if (peer >= t.size()) GTEST_SKIP() << "needs a partner rank";
  auto send = t.isend(peer, tag, outgoing);
  auto receive = t.irecv(peer, tag, incoming);
  send->wait();
  receive->wait();
  EXPECT_EQ(incoming, pattern(peer, bytes));
}

TEST_F(MpiTransportTest, ManySegmentMessagesOnOneTagArriveInOrder) {
  // Each message is many segments: they must not interleave with each other.
  MpiTransportOptions options;
  options.segment_bytes = 16 << 10;
  options.max_bytes_in_flight = 64 << 10;
  MpiTransport t(MPI_COMM_WORLD, options);
  const Tag tag = t.begin_operation();
  const std::vector<size_t> sizes = {100'000, 1, 0, 250'000, 40'000};
  std::vector<std::vector<std::byte>> outgoing;
  std::vector<std::vector<std::byte>> incoming;
  for (size_t i = 0; i < sizes.size(); ++i) {
    outgoing.push_back(pattern(t.rank() * 10 + static_cast<int>(i), sizes[i]));
    incoming.emplace_back(sizes[i]);
  }
  std::vector<std::unique_ptr<Request>> requests;
  for (size_t i = 0; i < sizes.size(); ++i) requests.push_back(t.isend(next_rank(t), tag, outgoing[i]));
  for (size_t i = 0; i < sizes.size(); ++i) requests.push_back(t.irecv(previous_rank(t), tag, incoming[i]));
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) (*it)->wait();  // last first
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(incoming[i], pattern(previous_rank(t) * 10 + static_cast<int>(i), sizes[i])) << "message " << i;
  }
}

TEST_F(MpiTransportTest, EmptyMessagesMatch) {
  MpiTransport& t = world_transport();
  ring_exchange(t, t.begin_operation() + 3, 0);
}

TEST_F(MpiTransportTest, SegmentsNeverExceedTheMessageCapWhateverTheSegmentSize) {
  // The cap is INT_MAX by default (MPI counts are int); a lower cap takes the
  // same path, so a message many caps long must travel in capped segments even
  // with an unbounded segment size: one segment each way in flight at most.
  EXPECT_EQ(MpiTransportOptions{}.max_message_bytes, static_cast<size_t>(INT_MAX));
  MpiTransportOptions options;
  options.segment_bytes = SIZE_MAX;
  options.max_message_bytes = 64 << 10;
  options.single_copy = false;  // MPI's segmented path is what is tested here
  options.max_bytes_in_flight = 1;
  MpiTransport t(MPI_COMM_WORLD, options);
  ring_exchange(t, t.begin_operation(), (5 << 16) + 321);
  EXPECT_GT(t.peak_bytes_in_flight(), 0u);
  EXPECT_LE(t.peak_bytes_in_flight(), 2 * options.max_message_bytes);  // one send and one receive segment
  MpiTransportOptions too_large;
  too_large.max_message_bytes = static_cast<size_t>(INT_MAX) + 1;
  EXPECT_EQ(error_code_of([&] { MpiTransport bad(MPI_COMM_WORLD, too_large); }), ErrorCode::kInvalidArgument);
}

TEST_F(MpiTransportTest, SameOffsetInTwoOperationsNeverCrosses) {
  MpiTransport& t = world_transport();
  const Tag first = t.begin_operation();
  const Tag second = t.begin_operation();
  EXPECT_EQ(second - first, Transport::kTagsPerOperation);
  for (const Tag offset : {Tag{0}, Tag{77}, Transport::kTagsPerOperation - 1}) {
    const auto a = pattern(t.rank(), 1000);
    const auto b = pattern(t.rank() + 100, 1000);
    std::vector<std::byte> got_a(1000);
    std::vector<std::byte> got_b(1000);
    // Receives posted in the opposite order to the sends: only tags match them.
    auto receive_b = t.irecv(previous_rank(t), second + offset, got_b);
    auto receive_a = t.irecv(previous_rank(t), first + offset, got_a);
    auto send_a = t.isend(next_rank(t), first + offset, a);
    auto send_b = t.isend(next_rank(t), second + offset, b);
    for (auto* r : {send_a.get(), send_b.get(), receive_a.get(), receive_b.get()}) r->wait();
    EXPECT_EQ(got_a, pattern(previous_rank(t), 1000));
    EXPECT_EQ(got_b, pattern(previous_rank(t) + 100, 1000));
  }
}

TEST_F(MpiTransportTest, AllGatherReturnsEveryRanksBytesOfAnySize) {
  MpiTransport& t = world_transport();
  const size_t mine = static_cast<size_t>(t.rank()) * 1000 + (t.rank() % 2 == 0 ? 0 : 70'000);
  const auto all = t.all_gather(pattern(t.rank(), mine));
  ASSERT_EQ(all.size(), static_cast<size_t>(t.size()));
  for (int r = 0; r < t.size(); ++r) {
    const size_t theirs = static_cast<size_t>(r) * 1000 + (r % 2 == 0 ? 0 : 70'000);
    EXPECT_EQ(all[static_cast<size_t>(r)], pattern(r, theirs)) << "rank " << r;
  }
}

TEST_F(MpiTransportTest, BarrierHoldsEveryoneUntilTheLastArrives) {
  MpiTransport& t = world_transport();
  // Every clock starts before the first barrier, so before the last rank
  // leaves it and sleeps: each rank's second barrier then lasts the whole
  // sleep, however unevenly the ranks run.
  const auto start = std::chrono::steady_clock::now();
  t.barrier();
  if (t.rank() == t.size() - 1) std::this_thread::sleep_for(300ms);
  t.barrier();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
}

TEST_F(MpiTransportTest, ThreadsMayShareTheTransport) {
  MpiTransport& t = world_transport();
  const Tag base = t.begin_operation();
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      const size_t bytes = 200'000 + static_cast<size_t>(i);
      std::vector<std::byte> incoming(bytes);
      const auto outgoing = pattern(t.rank() + i, bytes);
      auto receive = t.irecv(previous_rank(t), base + static_cast<Tag>(i), incoming);
      auto send = t.isend(next_rank(t), base + static_cast<Tag>(i), outgoing);
      receive->wait();
      send->wait();
      failures[static_cast<size_t>(i)] = incoming == pattern(previous_rank(t) + i, bytes) ? 0 : 1;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(std::accumulate(failures.begin(), failures.end(), 0), 0);
}

TEST_F(MpiTransportTest, TestReportsCompletionWithoutBlocking) {
  MpiTransport& t = world_transport();
  const Tag tag = t.begin_operation();
  std::vector<std::byte> incoming(4096);
  auto receive = t.irecv(previous_rank(t), tag, incoming);
  EXPECT_FALSE(receive->test());  // nobody sends before the barrier
  t.barrier();
  const auto outgoing = pattern(t.rank(), 4096);
  auto send = t.isend(next_rank(t), tag, outgoing);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!receive->test() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  EXPECT_TRUE(receive->test());  // and stays true
  send->wait();
  EXPECT_EQ(incoming, pattern(previous_rank(t), 4096));
}

TEST_F(MpiTransportTest, ASenderSendingMoreOrLessThanExpectedIsATransportError) {
  // Sizes below and above Open MPI's eager limit: a large message meeting a
  // small receive would overrun it, so the transport must never let it.
  MpiTransport& t = world_transport();
  const std::pair<size_t, size_t> sent_and_expected[] = {{100, 64}, {100, 300}, {100'000, 20'000}, {20'000, 100'000}};
  for (const auto& [sent, expected] : sent_and_expected) {
    const Tag tag = t.begin_operation();
    std::vector<std::byte> incoming(expected);
    const auto outgoing = pattern(t.rank(), sent);
    auto receive = t.irecv(previous_rank(t), tag, incoming);
    auto send = t.isend(next_rank(t), tag, outgoing);
    std::string message;
    EXPECT_EQ(error_code_of([&] { receive->wait(); }, &message), ErrorCode::kTransport);
    EXPECT_NE(message.find(fmt::format("from rank {}", previous_rank(t))), std::string::npos) << message;
    EXPECT_NE(message.find(fmt::format("sent {} bytes where {} were expected", sent, expected)), std::string::npos)
        << message;
    send->wait();
    t.barrier();
  }
}

TEST_F(MpiTransportTest, BadArgumentsAreTypedErrors) {
  MpiTransport& t = world_transport();
  std::vector<std::byte> buffer(8);
  EXPECT_EQ(error_code_of([&] { t.isend(t.size(), 0, buffer); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { t.irecv(-1, 0, buffer); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_of([&] { t.set_timeout(0ms); }), ErrorCode::kInvalidArgument);
  MpiTransportOptions zero_segment;
  zero_segment.segment_bytes = 0;
  EXPECT_EQ(error_code_of([&] { MpiTransport bad(MPI_COMM_WORLD, zero_segment); }), ErrorCode::kInvalidArgument);
}

// Whether process `pid` is stopped (state T in /proc/PID/stat; Linux).
bool is_stopped(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t name_end = line.rfind(')');  // the state follows the command's name
  return name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'T';
}

// The N of "has been silent for N ms" in `message`, or -1.
int64_t silent_ms(const std::string& message) {
  const std::string words = "has been silent for ";
  const size_t at = message.find(words);
  return at == std::string::npos ? -1 : std::strtoll(message.c_str() + at + words.size(), nullptr, 10);
}

TEST_F(MpiTransportTest, ASilentPeerTimesOutWithinTheBoundNamingIt) {
  // Rank 1 stops dead (SIGSTOP: its heartbeat thread too, as on a hung host)
  // while rank 0 waits on it; rank 0 must give up after the bound and name
  // it, then wake it (SIGCONT) so that the job goes on. One host: pids work.
  // Rank 0 waits until rank 1 has stopped rather than for a while: a wake
  // sent before the stop would leave it stopped for good. How long the
  // timeout took is load's business; that it came after the bound, by the
  // transport's own account, is the transport's.
  if (world_transport().size() < 2) GTEST_SKIP() << "needs two ranks";
  MpiTransportOptions options;
  options.timeout = 500ms;
  MpiTransport t(MPI_COMM_WORLD, options);
  const auto pids = t.all_gather(std::as_bytes(std::span<const pid_t>(std::vector<pid_t>{getpid()})));
  pid_t rank1 = 0;
  std::memcpy(&rank1, pids[1].data(), sizeof rank1);
  const Tag tag = t.begin_operation();
  t.barrier();
  if (t.rank() == 1) raise(SIGSTOP);
  if (t.rank() == 0) {
    while (!is_stopped(rank1)) std::this_thread::sleep_for(1ms);
    std::vector<std::byte> never(16);
    auto receive = t.irecv(1, tag, never);
    std::string message;
    EXPECT_EQ(error_code_of([&] { receive->wait(); }, &message), ErrorCode::kTimeout);
    EXPECT_NE(message.find("rank 1 has been silent"), std::string::npos) << message;
    EXPECT_GE(silent_ms(message), 500) << message;
    EXPECT_NE(message.find("(timeout 500 ms)"), std::string::npos) << message;
    EXPECT_NE(message.find("on host 0 (" + t.host_name(1) + ")"), std::string::npos) << message;
    EXPECT_NE(message.find("from rank 1"), std::string::npos) << message;
    kill(rank1, SIGCONT);
  }
  world_transport().barrier();
}

TEST_F(MpiTransportTest, AnAbortedRankIsNamedByEveryPeer) {
  MpiTransport t(MPI_COMM_WORLD);  // it ends unusable: not the shared one
  const int failing = t.size() - 1;
  std::vector<std::byte> buffer(1 << 20);
  if (t.rank() == failing) {
    t.abort("disk on fire");
    std::string message;
    EXPECT_EQ(error_code_of([&] { t.barrier(); }, &message), ErrorCode::kPeerFailed);  // unusable from now on
  } else {
    auto receive = t.irecv(failing, t.begin_operation(), buffer);
    std::string message;
    EXPECT_EQ(error_code_of([&] { receive->wait(); }, &message), ErrorCode::kPeerFailed);
    EXPECT_NE(message.find(fmt::format("rank {} failed", failing)), std::string::npos) << message;
    EXPECT_NE(message.find("disk on fire"), std::string::npos) << message;
  }
  world_transport().barrier();
}

}  // namespace
}  // namespace reshard
