#include "execute/support/transport_suite.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "reshard/execute/transport_calls.h"
#include "reshard/layout/error.h"

namespace reshard::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Bytes = std::vector<std::byte>;

int next_rank(const Transport& t) { return (t.rank() + 1) % t.size(); }
int previous_rank(const Transport& t) { return (t.rank() + t.size() - 1) % t.size(); }

// Bytes that say who sent them, to whom, and where they sit in the message.
Bytes pattern(int from, int to, size_t size, int salt = 0) {
  Bytes out(size);
  for (size_t i = 0; i < size; ++i) {
    out[i] = static_cast<std::byte>((i * 131 + static_cast<size_t>(from) * 7 + static_cast<size_t>(to) * 29 +
                                     static_cast<size_t>(salt) * 61) & 0xff);
  }
  return out;
}

Bytes int_bytes(uint64_t value) {
  Bytes out(sizeof value);
  std::memcpy(out.data(), &value, sizeof value);
  return out;
}

void wait_all(std::vector<std::unique_ptr<Request>>& requests) {
  for (auto& r : requests) r->wait();
}

void rank_and_size(Transport& t) {
  EXPECT_GE(t.rank(), 0);
  EXPECT_LT(t.rank(), t.size());
  const auto all = t.all_gather(int_bytes(static_cast<uint64_t>(t.rank())));
  ASSERT_EQ(all.size(), static_cast<size_t>(t.size()));
  for (int r = 0; r < t.size(); ++r) EXPECT_EQ(all[static_cast<size_t>(r)], int_bytes(static_cast<uint64_t>(r)));
}

void all_gather_sizes(Transport& t) {
  const auto all = t.all_gather(pattern(t.rank(), 0, static_cast<size_t>(t.rank()) * 3 + 1));
  ASSERT_EQ(all.size(), static_cast<size_t>(t.size()));
  for (int r = 0; r < t.size(); ++r) {
    EXPECT_EQ(all[static_cast<size_t>(r)], pattern(r, 0, static_cast<size_t>(r) * 3 + 1)) << "rank " << r;
  }
  const auto empty = t.all_gather({});
  ASSERT_EQ(empty.size(), static_cast<size_t>(t.size()));
  for (const Bytes& part : empty) EXPECT_TRUE(part.empty());
}

void barriers_keep_collectives_in_step(Transport& t) {
  for (int i = 0; i < 3; ++i) t.barrier();
  const auto all = t.all_gather(int_bytes(42 + static_cast<uint64_t>(t.rank())));
  for (int r = 0; r < t.size(); ++r) EXPECT_EQ(all[static_cast<size_t>(r)], int_bytes(42 + static_cast<uint64_t>(r)));
}

void ring(Transport& t, size_t bytes) {
  const Tag base = t.begin_operation();
  Bytes incoming(bytes);
  const Bytes outgoing = pattern(t.rank(), next_rank(t), bytes);
  auto receive = t.irecv(previous_rank(t), base, incoming);
  auto send = t.isend(next_rank(t), base, outgoing);
  send->wait();
  receive->wait();
  EXPECT_EQ(incoming, pattern(previous_rank(t), t.rank(), bytes));
}

void all_to_all(Transport& t) {
  const Tag base = t.begin_operation();
  const auto size_of = [](int from, int to) { return 1000 + static_cast<size_t>(from) * 37 + static_cast<size_t>(to); };
  std::vector<Bytes> incoming, outgoing;
  std::vector<std::unique_ptr<Request>> requests;
  for (int peer = 0; peer < t.size(); ++peer) incoming.emplace_back(size_of(peer, t.rank()));
  for (int peer = 0; peer < t.size(); ++peer) outgoing.push_back(pattern(t.rank(), peer, size_of(t.rank(), peer)));
  for (int peer = 0; peer < t.size(); ++peer) requests.push_back(t.irecv(peer, base + 7, incoming[static_cast<size_t>(peer)]));
  for (int peer = 0; peer < t.size(); ++peer) requests.push_back(t.isend(peer, base + 7, outgoing[static_cast<size_t>(peer)]));
  wait_all(requests);
  for (int peer = 0; peer < t.size(); ++peer) {
    EXPECT_EQ(incoming[static_cast<size_t>(peer)], pattern(peer, t.rank(), size_of(peer, t.rank()))) << "from " << peer;
  }
}

// Messages are matched by tag, whatever order the receives are posted in.
void tags_match_out_of_order(Transport& t) {
  const Tag base = t.begin_operation();
  const Bytes first = pattern(t.rank(), 1, 300), second = pattern(t.rank(), 2, 500);
  Bytes got_first(300), got_second(500);
  std::vector<std::unique_ptr<Request>> requests;
  requests.push_back(t.isend(next_rank(t), base + 1, first));
  requests.push_back(t.isend(next_rank(t), base + 2, second));
  requests.push_back(t.irecv(previous_rank(t), base + 2, got_second));
  requests.push_back(t.irecv(previous_rank(t), base + 1, got_first));
  wait_all(requests);
  EXPECT_EQ(got_first, pattern(previous_rank(t), 1, 300));
  EXPECT_EQ(got_second, pattern(previous_rank(t), 2, 500));
}

// Messages with the same source and tag arrive in the order they were sent.
void same_tag_in_order(Transport& t) {
  const Tag base = t.begin_operation();
  std::vector<Bytes> outgoing, incoming(3, Bytes(64));
  std::vector<std::unique_ptr<Request>> requests;
  for (int i = 0; i < 3; ++i) outgoing.push_back(pattern(t.rank(), i, 64, i));
  for (int i = 0; i < 3; ++i) requests.push_back(t.isend(next_rank(t), base, outgoing[static_cast<size_t>(i)]));
  for (int i = 0; i < 3; ++i) requests.push_back(t.irecv(previous_rank(t), base, incoming[static_cast<size_t>(i)]));
  wait_all(requests);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(incoming[static_cast<size_t>(i)], pattern(previous_rank(t), i, 64, i)) << i;
}

void zero_bytes(Transport& t) {
  const Tag base = t.begin_operation();
  auto receive = t.irecv(previous_rank(t), base, {});
  auto send = t.isend(next_rank(t), base, {});
  send->wait();
  receive->wait();
  EXPECT_TRUE(receive->test());
}

void send_to_self(Transport& t) {
  const Tag base = t.begin_operation();
  const Bytes outgoing = pattern(t.rank(), t.rank(), 4096);
  Bytes incoming(4096);
  auto send = t.isend(t.rank(), base + 3, outgoing);
  auto receive = t.irecv(t.rank(), base + 3, incoming);
  receive->wait();
  send->wait();
  EXPECT_EQ(incoming, outgoing);
}

// Two operations' tag ranges are disjoint and the same on every rank, so
// their messages never mix even when posted interleaved.
void operations_do_not_collide(Transport& t) {
  const Tag a = t.begin_operation();
  const Tag b = t.begin_operation();
  EXPECT_TRUE(b >= a + Transport::kTagsPerOperation || a >= b + Transport::kTagsPerOperation);
  Bytes mine = int_bytes(a);
  const Bytes b_bytes = int_bytes(b);
  mine.insert(mine.end(), b_bytes.begin(), b_bytes.end());
  for (const Bytes& other : t.all_gather(mine)) EXPECT_EQ(other, mine);
  const Bytes for_a = pattern(t.rank(), 0, 256, 1), for_b = pattern(t.rank(), 0, 256, 2);
  Bytes got_a(256), got_b(256);
  std::vector<std::unique_ptr<Request>> requests;
  requests.push_back(t.irecv(previous_rank(t), b, got_b));
  requests.push_back(t.irecv(previous_rank(t), a, got_a));
  requests.push_back(t.isend(next_rank(t), a, for_a));
  requests.push_back(t.isend(next_rank(t), b, for_b));
  wait_all(requests);
  EXPECT_EQ(got_a, pattern(previous_rank(t), 0, 256, 1));
  EXPECT_EQ(got_b, pattern(previous_rank(t), 0, 256, 2));
}

// test() polls a request to completion without blocking.
void test_polls_to_completion(Transport& t) {
  const Tag base = t.begin_operation();
  const Bytes outgoing = pattern(t.rank(), next_rank(t), 10000);
  Bytes incoming(10000);
  auto receive = t.irecv(previous_rank(t), base, incoming);
  auto send = t.isend(next_rank(t), base, outgoing);
  const auto deadline = Clock::now() + 20s;
  bool sent = false, received = false;
  while ((!sent || !received) && Clock::now() < deadline) {
    sent = sent || send->test();
    received = received || receive->test();
  }
  ASSERT_TRUE(sent && received) << "test() never reported completion";
  EXPECT_TRUE(send->test());
  EXPECT_EQ(incoming, pattern(previous_rank(t), t.rank(), 10000));
}

// A peer that is alive but slower than the timeout (the liveness bound) is
// waited for: the bound is for peers that are gone, not for slow ones. Rank 0
// sends only once rank 1, blocked in its wait, has waited four bounds by its
// own clock (a helper thread of rank 1 says so over the side channel): slow
// relative to the bound by cause, however the machine schedules the ranks.
void a_slow_peer_is_waited_for(Transport& t, SideChannel& side) {
  constexpr auto kBound = 300ms;
  const Tag base = t.begin_operation();
  const auto saved = t.timeout();
  t.set_timeout(kBound);
  EXPECT_EQ(t.timeout(), kBound);
  const Bytes outgoing = pattern(t.rank(), next_rank(t), 4096);
  Bytes incoming(4096);
  t.barrier();
  auto receive = t.irecv(previous_rank(t), base + 99, incoming);
  if (t.rank() == 0 && t.size() > 1) side.await(0);  // rank 1 has waited four bounds
  auto send = t.isend(next_rank(t), base + 99, outgoing);
  {
    const auto entered = Clock::now();
    // Notifies rank 0 however rank 1's wait ends, so rank 0 never hangs.
    std::jthread helper;
    if (t.rank() == 1) {
      helper = std::jthread([&side, entered, kBound] {
        std::this_thread::sleep_until(entered + 4 * kBound);
        side.notify(0);
      });
    }
    try {
      receive->wait();
      send->wait();
    } catch (const Error& e) {
      ADD_FAILURE() << "a slow but live peer was given up on: " << e.what();
    }
    if (t.rank() == 1) {
      EXPECT_GE(Clock::now() - entered, 4 * kBound) << "rank 1 did not wait for rank 0";
    }
  }
  EXPECT_EQ(incoming, pattern(previous_rank(t), t.rank(), 4096));
  t.set_timeout(saved);
  t.barrier();
}

// Every rank gets the same verdict, true only when all passed the same value.
void all_equal_agrees(Transport& t) {
  EXPECT_TRUE(t.all_equal(42));
  EXPECT_TRUE(t.all_equal(~uint64_t{0}));
  // One rank differs (in the low bits, then in the high bit): all say so.
  const bool last = t.rank() == t.size() - 1;
  EXPECT_EQ(t.all_equal(last ? 43 : 42), t.size() == 1);
  EXPECT_EQ(t.all_equal(last ? uint64_t{1} << 63 : 0), t.size() == 1);
  // A rank's own value is the largest or the smallest: both are noticed.
  EXPECT_EQ(t.all_equal(static_cast<uint64_t>(t.rank())), t.size() == 1);
  t.barrier();
  EXPECT_TRUE(t.all_equal(7));
}

// The counters grow by exactly the payloads that completed, each way.
void counts_payload_bytes(Transport& t) {
  t.barrier();
  const TransportCounters before = t.counters();
  const Tag base = t.begin_operation();
  const size_t out_bytes = 1000 + static_cast<size_t>(t.rank()) * 17;
  const size_t in_bytes = 1000 + static_cast<size_t>(previous_rank(t)) * 17;
  const Bytes outgoing = pattern(t.rank(), next_rank(t), out_bytes);
  Bytes incoming(in_bytes), empty_in;
  std::vector<std::unique_ptr<Request>> requests;
  requests.push_back(t.irecv(previous_rank(t), base, incoming));
  requests.push_back(t.irecv(previous_rank(t), base + 1, empty_in));
  requests.push_back(t.isend(next_rank(t), base, outgoing));
  requests.push_back(t.isend(next_rank(t), base + 1, {}));
  wait_all(requests);
  t.barrier();
  const TransportCounters after = t.counters();
  EXPECT_EQ(after.bytes_sent - before.bytes_sent, out_bytes);
  EXPECT_EQ(after.bytes_received - before.bytes_received, in_bytes);
  EXPECT_EQ(after.messages_sent - before.messages_sent, 2u);
  EXPECT_EQ(after.messages_received - before.messages_received, 2u);
}

// A message gathered from strided runs arrives scattered into other runs,
// byte for byte in order, and mixes with a plain receive of the same bytes.
void gather_and_scatter(Transport& t) {
  const Tag base = t.begin_operation();
  // Owned memory, as the exchange passes it: an MPI transport may then hand
  // the runs to MPI (derived datatypes); the unowned send below is packed.
  const auto source_owner = std::make_shared<const Bytes>(pattern(t.rank(), next_rank(t), 4096));
  const Bytes& source = *source_owner;
  std::vector<ConstByteRun> gather;
  for (size_t offset = 0; offset < 4096; offset += 256) gather.push_back({source.data() + offset, 100});
  const auto scattered_owner = std::make_shared<Bytes>(8192, std::byte{0});
  Bytes& scattered = *scattered_owner;
  Bytes plain(16 * 100);
  std::vector<ByteRun> scatter;
  for (size_t offset = 0; offset < 8192 && scatter.size() < 32; offset += 250) {
    scatter.push_back({scattered.data() + offset, 50});
  }
  std::vector<std::unique_ptr<Request>> requests;
  requests.push_back(irecv_scatter(t, previous_rank(t), base, scatter, scattered_owner));
  requests.push_back(t.irecv(previous_rank(t), base + 1, plain));
  requests.push_back(isend_gather(t, next_rank(t), base, gather, source_owner));
  requests.push_back(isend_gather(t, next_rank(t), base + 1, gather));
  wait_all(requests);
  const Bytes sent = pattern(previous_rank(t), t.rank(), 4096);
  Bytes expected;
  for (size_t offset = 0; offset < 4096; offset += 256) expected.insert(expected.end(), sent.begin() + static_cast<std::ptrdiff_t>(offset), sent.begin() + static_cast<std::ptrdiff_t>(offset + 100));
  EXPECT_EQ(plain, expected);
  Bytes received;
  for (const ByteRun& run : scatter) received.insert(received.end(), run.data, run.data + run.size);
  EXPECT_EQ(received, expected);
  EXPECT_EQ(scattered[50], std::byte{0});  // between the runs nothing is written
}

// A case that needs no side channel.
TransportCase plain(std::string name, std::function<void(Transport&)> run) {
  return {std::move(name), [run = std::move(run)](Transport& t, SideChannel&) { run(t); }};
}

}  // namespace

std::vector<TransportCase> transport_cases() {
  return {
      plain("RankAndSize", rank_and_size),
      plain("AllGatherSizes", all_gather_sizes),
      plain("BarriersKeepCollectivesInStep", barriers_keep_collectives_in_step),
      plain("RingSmall", [](Transport& t) { ring(t, 1); }),
      plain("RingOddSize", [](Transport& t) { ring(t, (size_t{1} << 20) + 7); }),
      plain("RingLarge", [](Transport& t) { ring(t, (size_t{9} << 20) + 3); }),
      plain("AllToAll", all_to_all),
      plain("TagsMatchOutOfOrder", tags_match_out_of_order),
      plain("SameTagInOrder", same_tag_in_order),
      plain("ZeroBytes", zero_bytes),
      plain("SendToSelf", send_to_self),
      plain("OperationsDoNotCollide", operations_do_not_collide),
      plain("TestPollsToCompletion", test_polls_to_completion),
      {"ASlowPeerIsWaitedFor", a_slow_peer_is_waited_for},
      plain("AllEqualAgrees", all_equal_agrees),
      plain("CountsPayloadBytes", counts_payload_bytes),
      plain("GatherAndScatter", gather_and_scatter),
  };
}

}  // namespace reshard::testing
