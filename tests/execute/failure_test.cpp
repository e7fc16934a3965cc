// A failing process must make the others stop with an error, soon, never hang.
#include <chrono>

#include <gtest/gtest.h>

#include "execute/support/rank_threads.h"
#include "execute/support/reference_arrays.h"
#include "reshard/execute/operations.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Forwards to another transport, but throws on the send after `sends_before_fault`.
class FaultyTransport final : public Transport {
 public:
  FaultyTransport(Transport& inner, int sends_before_fault) : inner_(inner), sends_left_(sends_before_fault) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::unique_ptr<Request> isend(int peer, Tag tag, std::span<const std::byte> data) override {
    if (sends_left_-- == 0) throw Error(ErrorCode::kTransport, "injected fault mid-transfer");
    return inner_.isend(peer, tag, data);
  }
  std::unique_ptr<Request> irecv(int peer, Tag tag, std::span<std::byte> data) override {
    return inner_.irecv(peer, tag, data);
  }
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> local) override {
    return inner_.all_gather(local);
  }
  void barrier() override { inner_.barrier(); }
  Tag begin_operation() override { return inner_.begin_operation(); }
  void abort(std::string_view reason) noexcept override { inner_.abort(reason); }
  void set_timeout(std::chrono::milliseconds timeout) override { inner_.set_timeout(timeout); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }

 private:
  Transport& inner_;
  int sends_left_;
};

class Failures : public ::testing::Test {
 protected:
  const Topology topology_ = Topology::uniform(8, 4);
  const Shape shape_{64, 256};
  const NamedSharding rows_{Mesh({{"x", 8}}, {0, 1, 2, 3, 4, 5, 6, 7}), PartitionSpec({{"x"}})};
  const NamedSharding columns_{Mesh({{"x", 8}}, {7, 5, 3, 1, 6, 4, 2, 0}), PartitionSpec({{}, {"x"}})};
};

TEST_F(Failures, OneRankFailingMidTransferStopsTheOthersQuickly) {
  ExecuteOptions options;
  options.chunk_bytes = 512;  // many messages, so the fault lands mid-transfer
  options.max_bytes_in_flight = 1024;
  std::vector<ErrorCode> codes(4, ErrorCode::kInvalidArgument);
  std::vector<std::string> messages(4);
  const auto start = Clock::now();
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
  EXPECT_LT(Clock::now() - start, 5s) << "the others waited out their 30 s timeout";
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(codes[static_cast<size_t>(r)], ErrorCode::kPeerFailed) << "rank " << r << ": " << messages[static_cast<size_t>(r)];
    EXPECT_NE(messages[static_cast<size_t>(r)].find("process 2"), std::string::npos) << messages[static_cast<size_t>(r)];
  }
}

TEST_F(Failures, ARankThatNeverTurnsUpIsATimeoutNotAHang) {
  std::vector<ErrorCode> codes(2, ErrorCode::kInvalidArgument);
  const auto start = Clock::now();
  EXPECT_THROW(testing::run_ranks(
                   2,
                   [&](Transport& t) {
                     if (t.rank() == 1) return;  // skips the collective operation
                     const Topology two = Topology::uniform(2, 2);
                     const NamedSharding src(Mesh({{"x", 2}}, {0, 1}), PartitionSpec({{"x"}}));
                     const NamedSharding dst(Mesh({{"x", 2}}, {1, 0}), PartitionSpec({{"x"}}));
                     try {
                       reshard_array(testing::reference_array({4, 4}, DType::kF32, src, two, 0, 1), dst, t);
                     } catch (const Error& e) {
                       codes[0] = e.code();
                       throw;
                     }
                   },
                   300ms),
               Error);
  EXPECT_EQ(codes[0], ErrorCode::kTimeout);
  EXPECT_LT(Clock::now() - start, 5s);
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
