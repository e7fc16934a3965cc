// The exchange's bounds on what is in flight: bytes (leaving out messages a
// transport moves in place), and messages in number whatever their size.
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

#include <gtest/gtest.h>

#include "execute/support/forwarding_transport.h"
#include "execute/support/rank_threads.h"
#include "execute/support/reference_arrays.h"
#include "reshard/execute/operations.h"

namespace reshard {
namespace {

// Counts the messages an exchange has posted and not yet finished (each way),
// and the most there were at once. `in_place` says whether the transport
// claims to move every message in place.
struct InFlightCount {
  std::mutex mutex;
  int sends = 0, receives = 0;
  int peak_sends = 0, peak_receives = 0;
  int all_sends = 0, all_receives = 0;

  void posted(bool send) {
    std::lock_guard lock(mutex);
    ++(send ? all_sends : all_receives);
    int& n = send ? sends : receives;
    ++n;
    int& peak = send ? peak_sends : peak_receives;
    peak = std::max(peak, n);
  }
  void finished(bool send) {
    std::lock_guard lock(mutex);
    --(send ? sends : receives);
  }
};

// A request that tells the count once it has finished (or is dropped).
class CountedRequest final : public Request {
 public:
  CountedRequest(std::unique_ptr<Request> inner, InFlightCount& count, bool send)
      : inner_(std::move(inner)), count_(count), send_(send) {
    count_.posted(send_);
  }
  ~CountedRequest() override { finish(); }
  CountedRequest(const CountedRequest&) = delete;
  CountedRequest& operator=(const CountedRequest&) = delete;
  void wait() override {
    inner_->wait();
    finish();
  }
  bool test() override {
    const bool done = inner_->test();
    if (done) finish();
    return done;
  }

 private:
  void finish() {
    if (!finished_.exchange(true)) count_.finished(send_);
  }
  std::unique_ptr<Request> inner_;
  InFlightCount& count_;
  const bool send_;
  std::atomic<bool> finished_{false};
};

// The in-process transport, saying every message moves in place (or not),
// and counting what the exchange posts: batches of sends and scattered
// receives, the two ways it starts messages.
class InPlaceTransport final : public testing::ForwardingTransport, public InPlaceTransfers {
 public:
  InPlaceTransport(Transport& inner, bool in_place, InFlightCount& count)
      : ForwardingTransport(inner), in_place_(in_place), count_(count) {}

  FastPaths fast_paths() override {
    FastPaths paths = ForwardingTransport::fast_paths();
    paths.in_place = this;
    return paths;
  }
  bool sends_in_place(int, std::span<const ConstRunRows>) const override { return in_place_; }
  bool receives_in_place(int) const override { return in_place_; }
  bool copies_with_sends() const override { return false; }
  std::vector<std::unique_ptr<Request>> isend_gather_all_with_copies(std::span<const GatherSend> sends, int threads,
                                                                     std::span<const LocalCopy> copies) override {
    return without_fast_path::isend_gather_all_with_copies(*this, sends, threads, copies);
  }
  std::vector<std::unique_ptr<Request>> isend_gather_all(std::span<const GatherSend> sends, int threads) override {
    std::vector<std::unique_ptr<Request>> requests = reshard::isend_gather_all(inner(), sends, threads);
    for (auto& request : requests) request = std::make_unique<CountedRequest>(std::move(request), count_, true);
    return requests;
  }
  std::unique_ptr<Request> irecv_scatter_rows(int peer, Tag tag, std::span<const RunRows> rows,
                                              std::shared_ptr<const void> owner) override {
    return std::make_unique<CountedRequest>(reshard::irecv_scatter_rows(inner(), peer, tag, rows, std::move(owner)),
                                            count_, false);
  }

 private:
  const bool in_place_;
  InFlightCount& count_;
};

// A [rows, 256] f32 array from rows over 8 devices of 2 processes to
// columns: each process sends the other 16 pieces of rows / 8 x 32 elements,
// in messages of at most `message_bytes`, and receives as many. Every byte is
// checked; returns each process's counts.
std::vector<InFlightCount> reshard_counting(bool in_place, int64_t rows_of_array, uint64_t message_bytes,
                                            uint64_t max_bytes_in_flight) {
  const Topology topology = Topology::uniform(8, 2);
  const Shape shape{rows_of_array, 256};
  const NamedSharding rows(Mesh({{"x", 8}}, {0, 1, 2, 3, 4, 5, 6, 7}), PartitionSpec({{"x"}}));
  const NamedSharding columns(Mesh({{"x", 8}}, {7, 5, 3, 1, 6, 4, 2, 0}), PartitionSpec({{}, {"x"}}));
  ExecuteOptions options;
  options.message_bytes = message_bytes;
  options.max_bytes_in_flight = max_bytes_in_flight;
  std::vector<InFlightCount> counts(2);
  testing::run_ranks(2, [&](Transport& t) {
    InPlaceTransport counting(t, in_place, counts[static_cast<size_t>(t.rank())]);
    const ShardedArray a = testing::reference_array(shape, DType::kF32, rows, topology, t.rank(), 11);
    const ShardedArray b = reshard_array(a, columns, counting, options);
    EXPECT_TRUE(testing::matches_reference(b, 11));
  });
  for (const InFlightCount& count : counts) {
    EXPECT_EQ(count.sends, 0);
    EXPECT_EQ(count.receives, 0);
  }
  return counts;
}

// Each process posted `all` messages each way, at most `peak` at once.
void expect_counts(const std::vector<InFlightCount>& counts, int all, int peak) {
  for (size_t rank = 0; rank < counts.size(); ++rank) {
    const InFlightCount& count = counts[rank];
    EXPECT_EQ(count.all_sends, all) << "rank " << rank;
    EXPECT_EQ(count.all_receives, all) << "rank " << rank;
    EXPECT_EQ(count.peak_sends, peak) << "rank " << rank;
    EXPECT_EQ(count.peak_receives, peak) << "rank " << rank;
  }
}

TEST(InFlightBound, MessagesThatHoldMemoryStayUnderTheByteBound) {
  // 16 messages of 1 KiB each way, a 1-byte bound: one at a time.
  expect_counts(reshard_counting(false, 64, 1024, 1), 16, 1);
}

TEST(InFlightBound, MessagesMovedInPlaceAreNotCountedInBytes) {
  // The same bound: every message of the operation posted together.
  expect_counts(reshard_counting(true, 64, 1024, 1), 16, 16);
}

TEST(InFlightBound, MessagesMovedInPlaceAreBoundedInNumber) {
  // 16 pieces of 8 KiB in 256-byte messages: 512 each way, of which 256 (the
  // exchange's bound in number) are posted at once.
  expect_counts(reshard_counting(true, 512, 256, 1), 512, 256);
}

TEST(InFlightBound, TinyMessagesAreBoundedInNumberToo) {
  // 512 messages of 256 bytes each way, all within a 1 GiB byte bound: still
  // 256 at once. Thousands of tiny messages posted together made every round
  // of a transport's progress thousands of polls.
  expect_counts(reshard_counting(false, 512, 256, uint64_t{1} << 30), 512, 256);
}

}  // namespace
}  // namespace reshard
