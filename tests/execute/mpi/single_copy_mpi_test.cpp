// The same-host single-copy path: which pairs take it, and that strided, contiguous, owned and unowned
// messages all arrive byte for byte and are counted.
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "execute/shared_arena.h"
#include "mpi_world.h"
#include "reshard/execute/buffer.h"
#include "reshard/layout/error.h"
#include "strided_reshard_check.h"
#include "support/capability.h"

namespace reshard {
namespace {

using testing::MpiTest;
using testing::world_transport;

bool opted_out() {
  const char* value = std::getenv("RESHARD_SINGLE_COPY");
  return value != nullptr && std::string_view(value) == "0";
}

// The run turned the shared-memory path off, itself or with all single copy
// (RESHARD_SHARED_MEMORY=0, RESHARD_SINGLE_COPY=0): no path the machine lacks.
bool shared_memory_opted_out() {
  const char* value = std::getenv("RESHARD_SHARED_MEMORY");
  return opted_out() || (value != nullptr && std::string_view(value) == "0");
}

// Every rank's view of which peers it copies with directly, gathered.
std::vector<std::vector<std::byte>> direct_maps(const MpiTransport& t, Transport& gather_on) {
  std::vector<std::byte> mine(static_cast<size_t>(t.size()));
  for (int peer = 0; peer < t.size(); ++peer) mine[static_cast<size_t>(peer)] = std::byte{t.copies_directly_with(peer)};
  return gather_on.all_gather(mine);
}

class SingleCopyMpi : public MpiTest {};

TEST_F(SingleCopyMpi, PairsAgreeAndEveryPairOfThisHostCopiesDirectly) {
  MpiTransport& t = world_transport();
  const auto maps = direct_maps(t, t);
  for (int a = 0; a < t.size(); ++a) {
    EXPECT_EQ(maps[static_cast<size_t>(a)][static_cast<size_t>(a)], std::byte{0}) << "rank " << a << " with itself";
    for (int b = 0; b < t.size(); ++b) {
      EXPECT_EQ(maps[static_cast<size_t>(a)][static_cast<size_t>(b)], maps[static_cast<size_t>(b)][static_cast<size_t>(a)])
          << "ranks " << a << " and " << b << " disagree";
    }
  }
  if (t.size() < 2) return;
  // mpirun here starts every rank on this host, so every pair copies
  // directly unless the environment turns it off, or the kernel forbids
  // attaching to another process's memory (then MPI carries everything).
  const bool direct = t.copies_directly_with((t.rank() + 1) % t.size());
  for (int peer = 0; peer < t.size(); ++peer) {
    if (peer != t.rank()) {
      EXPECT_EQ(t.copies_directly_with(peer), direct) << "peer " << peer;
    }
  }
  MpiTransportOptions off;
  off.single_copy = false;
  MpiTransport without(MPI_COMM_WORLD, off);
  for (int peer = 0; peer < t.size(); ++peer) EXPECT_FALSE(without.copies_directly_with(peer));
  if (opted_out()) {
    EXPECT_FALSE(direct) << "RESHARD_SINGLE_COPY=0 must turn it off";
  }
  if (!opted_out() && !direct) {
    RESHARD_SKIP_WITHOUT("cross-memory attach") << "this host forbids it: MPI carries every message";
  }
}

// Strided or contiguous on either side, each way round the ring: the sender
// exposes long owned runs in place and gathers short or unowned ones.
TEST_F(SingleCopyMpi, StridedAndContiguousRunsArriveByteForByteAndAreCounted) {
  MpiTransport& t = world_transport();
  if (t.size() < 2) GTEST_SKIP() << "needs two ranks";
  const int next = (t.rank() + 1) % t.size();
  const int previous = (t.rank() + t.size() - 1) % t.size();
  struct Shape {
    size_t run;
    size_t stride;
    size_t count;
  };
  // 512 KiB each: 256-byte runs 1 KiB apart, 8 KiB runs 12 KiB apart, one run.
  const Shape shapes[] = {{256, 1024, 2048}, {8192, 12288, 64}, {size_t{512} << 10, 0, 1}};
  for (const Shape& out : shapes) {
    for (const Shape& in : shapes) {
      for (const bool owned : {true, false}) {
        Buffer source = Buffer::allocate(out.stride * out.count + out.run);
        Buffer target = Buffer::allocate(in.stride * in.count + in.run);
        for (size_t i = 0; i < source.size(); ++i) source.data()[i] = static_cast<std::byte>((i * 7 + static_cast<size_t>(t.rank())) & 0xff);
        std::memset(target.data(), 0, target.size());
        std::vector<ConstByteRun> sends;
        std::vector<ByteRun> receives;
        for (size_t i = 0; i < out.count; ++i) sends.push_back({source.data() + i * out.stride, out.run});
        for (size_t i = 0; i < in.count; ++i) receives.push_back({target.data() + i * in.stride, in.run});
        const TransportCounters before = t.counters();
        const Tag tag = t.begin_operation();
        auto receive = t.irecv_scatter(previous, tag, receives, nullptr);
        auto send = t.isend_gather(next, tag, sends, owned ? source.owner() : nullptr);
        send->wait();
        receive->wait();
        const TransportCounters after = t.counters();
        // What arrived is the previous rank's gathered bytes, in order.
        std::vector<std::byte> expected, found;
        for (size_t i = 0; i < out.count; ++i) {
          for (size_t b = 0; b < out.run; ++b) {
            expected.push_back(static_cast<std::byte>(((i * out.stride + b) * 7 + static_cast<size_t>(previous)) & 0xff));
          }
        }
        for (const ByteRun& r : receives) found.insert(found.end(), r.data, r.data + r.size);
        EXPECT_EQ(found, expected) << "runs " << out.run << " to " << in.run << (owned ? ", owned" : ", unowned");
        EXPECT_EQ(after.bytes_sent - before.bytes_sent, 512u << 10);
        EXPECT_EQ(after.bytes_received - before.bytes_received, 512u << 10);
        t.barrier();
      }
    }
  }
}

// Sets an environment variable for one scope, and puts back what was there.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) ::setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST_F(SingleCopyMpi, EveryRankNamesThePathToEachPeerAndWhy) {
  MpiTransport& t = world_transport();
  EXPECT_EQ(t.path_to(t.rank()), PeerPath::kSelf);
  for (int peer = 0; peer < t.size(); ++peer) {
    if (peer == t.rank()) continue;
    const PeerPath path = t.path_to(peer);
    EXPECT_EQ(path == PeerPath::kSingleCopy || path == PeerPath::kSharedMemory, t.copies_directly_with(peer))
        << "peer " << peer;
    if (opted_out()) {
      EXPECT_EQ(t.path_to(peer), PeerPath::kOptedOut) << "peer " << peer;
    }
  }
  EXPECT_THROW(static_cast<void>(t.path_to(t.size())), Error);
  EXPECT_EQ(t.describe_paths().rfind("rank " + std::to_string(t.rank()) + " of " + std::to_string(t.size()) + ":", 0),
            0u)
      << t.describe_paths();
  MpiTransportOptions off;
  off.single_copy = false;
  MpiTransport without(MPI_COMM_WORLD, off);
  for (int peer = 0; peer < t.size(); ++peer) {
    if (peer != t.rank()) {
      EXPECT_EQ(without.path_to(peer), PeerPath::kOptedOut) << "peer " << peer;
    }
  }
  if (t.size() > 1) {
    EXPECT_NE(without.describe_paths().find("MPI (single copy off) with rank"), std::string::npos);
  }
}

TEST_F(SingleCopyMpi, EveryRankOfThisJobCountsTheHostsProcesses) {
  // mpirun here starts every rank on this host; whether they may attach to
  // each other's memory or not, they share its cores.
  MpiTransport& t = world_transport();
  EXPECT_EQ(t.processes_on_this_host(), t.size());
  MpiTransportOptions off;
  off.single_copy = false;
  EXPECT_EQ(MpiTransport(MPI_COMM_WORLD, off).processes_on_this_host(), t.size());
}

TEST_F(SingleCopyMpi, EveryRankOfThisJobIsOnHostZeroUnderThisHostsName) {
  // One host here (other hosts: tests/netns): host 0 for every rank, named
  // by its host name and, where it has one, its address, alike for all.
  MpiTransport& t = world_transport();
  std::array<char, 256> name{};
  ASSERT_EQ(gethostname(name.data(), name.size() - 1), 0);
  for (int peer = 0; peer < t.size(); ++peer) {
    EXPECT_EQ(t.host_of(peer), 0) << "rank " << peer;
    EXPECT_EQ(t.host_name(peer), t.host_name(t.rank())) << "rank " << peer;
  }
  EXPECT_EQ(t.host_name(t.rank()).rfind(name.data(), 0), 0u) << t.host_name(t.rank());
  EXPECT_THROW(static_cast<void>(t.host_of(t.size())), Error);
  EXPECT_THROW(static_cast<void>(t.host_name(-1)), Error);
}

TEST_F(SingleCopyMpi, APeerTheKernelRefusesGoesThroughMpiSaysSoAndStillDeliversEveryByte) {
  MpiTransport& t = world_transport();
  if (t.size() < 2) GTEST_SKIP() << "needs two ranks";
  if (!t.copies_directly_with((t.rank() + 1) % t.size())) {
    if (opted_out()) GTEST_SKIP() << "this run turned single copy off (RESHARD_SINGLE_COPY=0): none to refuse";
    RESHARD_SKIP_WITHOUT("cross-memory attach") << "no single copy here to refuse";
  }
  std::optional<MpiTransport> refused;
  {
    // Rank 0 plays a process whose memory the kernel will not let its peers
    // attach to (RESHARD_SINGLE_COPY=refuse fails its probes, as Yama would).
    const ScopedEnvironment refuse("RESHARD_SINGLE_COPY", t.rank() == 0 ? "refuse" : nullptr);
    refused.emplace(MPI_COMM_WORLD);
  }
  // The pairs without rank 0 copy as the world's transport does.
  const PeerPath direct = t.path_to((t.rank() + 1) % t.size());
  for (int peer = 0; peer < t.size(); ++peer) {
    if (peer == t.rank()) continue;
    const PeerPath expected = t.rank() == 0 || peer == 0 ? PeerPath::kRefused : direct;
    EXPECT_EQ(refused->path_to(peer), expected) << "peer " << peer;
  }
  const std::string line = refused->describe_paths();
  EXPECT_NE(line.find(t.rank() == 0 ? "MPI (attach refused) with rank" : "MPI (attach refused) with rank 0"),
            std::string::npos)
      << line;
  if (t.rank() == 0) {
    EXPECT_EQ(line.find("single copy with"), std::string::npos) << line;
    EXPECT_EQ(line.find("shared memory with"), std::string::npos) << line;
  }
  // Pairs with rank 0 go through MPI, the others copy directly: one reshard uses both.
  testing::check_strided_reshard(*refused, 256, /*round_trip=*/true, 53);
}

TEST_F(SingleCopyMpi, SharedMemoryPairsReadArenaBuffersAndEachOptOutFallsBackToTheKernelCopy) {
  MpiTransport& t = world_transport();
  if (t.size() < 2) GTEST_SKIP() << "needs two ranks";
  const PeerPath direct = t.path_to((t.rank() + 1) % t.size());
  const char* setting = std::getenv("RESHARD_SHARED_MEMORY");
  if (setting != nullptr && std::string_view(setting) == "0") {
    EXPECT_NE(direct, PeerPath::kSharedMemory) << "RESHARD_SHARED_MEMORY=0 must turn it off";
  }
  if (direct != PeerPath::kSharedMemory) {
    if (shared_memory_opted_out()) GTEST_SKIP() << "this run turned shared memory off: " << t.describe_paths();
    RESHARD_SKIP_WITHOUT("shared memory between ranks") << t.describe_paths();
  }
  // From now on this process's large buffers live where its peers map them.
  const execute_detail::SharedArena* arena = execute_detail::SharedArena::for_process();
  ASSERT_NE(arena, nullptr);
  const Buffer large = Buffer::allocate(size_t{1} << 20);
  EXPECT_TRUE(arena->contains(large.data(), large.size()));
  EXPECT_NE(t.describe_paths().find("shared memory with rank"), std::string::npos) << t.describe_paths();

  // Off in the options: the kernel copy, every pair.
  MpiTransportOptions off;
  off.shared_memory = false;
  MpiTransport kernel_copy(MPI_COMM_WORLD, off);
  for (int peer = 0; peer < t.size(); ++peer) {
    if (peer != t.rank()) {
      EXPECT_EQ(kernel_copy.path_to(peer), PeerPath::kSingleCopy) << "peer " << peer;
    }
  }
  testing::check_strided_reshard(kernel_copy, 256, /*round_trip=*/true, 59);

  // Rank 0's mappings fail (as without pidfd_getfd): its pairs take the
  // kernel copy, the others map; one reshard uses both and every byte arrives.
  std::optional<MpiTransport> refused;
  {
    const ScopedEnvironment refuse("RESHARD_SHARED_MEMORY", t.rank() == 0 ? "refuse" : nullptr);
    refused.emplace(MPI_COMM_WORLD);
  }
  for (int peer = 0; peer < t.size(); ++peer) {
    if (peer == t.rank()) continue;
    const PeerPath expected = t.rank() == 0 || peer == 0 ? PeerPath::kSingleCopy : PeerPath::kSharedMemory;
    EXPECT_EQ(refused->path_to(peer), expected) << "peer " << peer;
  }
  EXPECT_NE(refused->describe_paths().find(t.rank() == 0 ? "single copy with rank" : "single copy with rank 0"),
            std::string::npos)
      << refused->describe_paths();
  testing::check_strided_reshard(*refused, 256, /*round_trip=*/true, 61);
}

bool senders_write_here() {
  const char* value = std::getenv("RESHARD_SENDERS_WRITE");
  return value == nullptr || std::string_view(value) != "0";
}

// What `t` sent, and wrote into its receivers itself, during `move`.
template <typename Move>
std::pair<uint64_t, uint64_t> sent_and_written(const Transport& t, Move&& move) {
  const TransportCounters before = t.counters();
  move();
  const TransportCounters after = t.counters();
  return {after.bytes_sent - before.bytes_sent,
          after.bytes_written_into_receivers - before.bytes_written_into_receivers};
}

TEST_F(SingleCopyMpi, SendersWriteStridedMessagesIntoArenaPeersAndReceiversReadTheRest) {
  MpiTransport& t = world_transport();
  if (t.size() < 2) GTEST_SKIP() << "needs two ranks";
  if (t.path_to((t.rank() + 1) % t.size()) != PeerPath::kSharedMemory) {
    if (shared_memory_opted_out()) GTEST_SKIP() << "this run turned shared memory off: " << t.describe_paths();
    RESHARD_SKIP_WITHOUT("shared memory between ranks") << t.describe_paths();
  }
  // Rows to columns: 256-byte rows of each source shard into stretches of
  // the targets (1024 rows: target shards of 256 KiB, in the arena). The
  // senders write every byte where receivers offer; none where they don't.
  const auto [sent, written] = sent_and_written(t, [&] { testing::check_strided_reshard(t, 1024, false, 67); });
  EXPECT_GT(sent, 0u);
  EXPECT_EQ(written, senders_write_here() ? sent : 0) << "sent " << sent;
  // And back: the runs are the receivers' now, so they read.
  const auto [sent_back, written_back] =
      sent_and_written(t, [&] { testing::check_strided_reshard(t, 1024, true, 71); });
  EXPECT_GT(sent_back, sent);
  EXPECT_EQ(written_back, senders_write_here() ? sent : 0) << "only the way out is written by the senders";

  // Off in one process's options (rank 0's receives never offer): its peers'
  // messages to it are read by it, the others' still written; every byte arrives.
  MpiTransportOptions options;
  options.senders_write = t.rank() != 0;
  MpiTransport mixed(MPI_COMM_WORLD, options);
  const auto [mixed_sent, mixed_written] =
      sent_and_written(mixed, [&] { testing::check_strided_reshard(mixed, 1024, false, 73); });
  EXPECT_GT(mixed_sent, 0u);
  if (!senders_write_here()) {
    EXPECT_EQ(mixed_written, 0u);
  } else if (t.size() > 2 || t.rank() == 0) {
    // Rank 0 sends to peers that offer; every rank but 0 sends to rank 0 too (read there).
    EXPECT_GT(mixed_written, 0u);
    EXPECT_LE(mixed_written, mixed_sent);
  } else {
    EXPECT_EQ(mixed_written, 0u) << "rank 1's only peer, rank 0, offers nothing";
  }
}

TEST_F(SingleCopyMpi, WhatMovesInPlaceIsWhatNeedsNoBufferOfTheTransports) {
  // Sends from rows in the arena to a peer that maps it are read or written
  // where they lie; sends from other memory may be gathered first; receives
  // from any peer of the host are written straight into their rows.
  MpiTransport& t = world_transport();
  if (t.size() < 2) GTEST_SKIP() << "needs two ranks";
  const Buffer in_arena = Buffer::allocate(size_t{1} << 20);
  std::vector<std::byte> elsewhere(4096);
  const execute_detail::SharedArena* arena = execute_detail::SharedArena::for_process();
  const bool arena_here = arena != nullptr && arena->contains(in_arena.data(), in_arena.size());
  const std::array<ConstRunRows, 1> arena_rows{ConstRunRows{in_arena.data(), 256, 4096, 64}};
  const std::array<ConstRunRows, 1> other_rows{ConstRunRows{elsewhere.data(), 256, 1024, 4}};
  for (int peer = 0; peer < t.size(); ++peer) {
    if (peer == t.rank()) continue;
    const PeerPath path = t.path_to(peer);
    EXPECT_EQ(t.sends_in_place(peer, arena_rows), path == PeerPath::kSharedMemory && arena_here) << "peer " << peer;
    EXPECT_FALSE(t.sends_in_place(peer, other_rows)) << "peer " << peer;
    EXPECT_EQ(t.receives_in_place(peer), t.copies_directly_with(peer)) << "peer " << peer;
  }
  EXPECT_FALSE(t.sends_in_place(t.size(), arena_rows)) << "a rank outside the job";
  // Through MPI, everything may be staged.
  MpiTransportOptions through_mpi;
  through_mpi.single_copy = false;
  MpiTransport packed(MPI_COMM_WORLD, through_mpi);
  for (int peer = 0; peer < t.size(); ++peer) {
    EXPECT_FALSE(packed.sends_in_place(peer, arena_rows)) << "peer " << peer;
    EXPECT_FALSE(packed.receives_in_place(peer)) << "peer " << peer;
  }
}

TEST_F(SingleCopyMpi, SendersThatWaitForALateReceiverWriteWithoutIt) {
  // A batch's senders wait a moment for every receiver to say where its runs
  // are, then write to those that have: rank 1 comes 100 ms late, and every
  // byte still arrives, whoever wrote it.
  MpiTransport& t = world_transport();
  if (t.size() < 2) GTEST_SKIP() << "needs two ranks";
  if (t.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  testing::check_strided_reshard(t, 1024, /*round_trip=*/true, 79);
}

TEST_F(SingleCopyMpi, AWithdrawnUnownedSendStillDeliversWhatItWasGiven) {
  // The sender drops its request at once and reuses its buffer: the receiver
  // must see the bytes as they were when sent, never the reuse.
  MpiTransportOptions options;
  options.timeout = std::chrono::seconds(30);
  MpiTransport t(MPI_COMM_WORLD, options);
  if (t.size() < 2) GTEST_SKIP() << "needs two ranks";
  const size_t bytes = 300'000;
  std::vector<std::byte> outgoing(bytes, std::byte{0x11});
  const Tag tag = t.begin_operation();
  t.isend((t.rank() + 1) % t.size(), tag, outgoing).reset();
  std::fill(outgoing.begin(), outgoing.end(), std::byte{0x22});
  t.barrier();
  std::vector<std::byte> incoming(bytes);
  t.recv((t.rank() + t.size() - 1) % t.size(), tag, incoming);
  EXPECT_EQ(incoming, std::vector<std::byte>(bytes, std::byte{0x11}));
}

TEST_F(SingleCopyMpi, AStridedReshardArrivesWholeAndIsCountedAsPlanned) {
  // Runs of 256 bytes on the sending side, then (back) on the receiving side.
  testing::check_strided_reshard(world_transport(), 256, /*round_trip=*/true, 47);
}

}  // namespace
}  // namespace reshard
