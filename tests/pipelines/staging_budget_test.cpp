// Staging under a memory budget: the pieces a chunk is cut into are
// contiguous runs of it, in order, each within the piece size; the budget
// never holds more than it allows.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "pipelines/checkpoint/staging_budget.h"
#include "reshard/layout/box.h"

namespace reshard::pipelines_detail {
namespace {

TEST(StagingBudget, PiecesAreContiguousRunsInOrderWithinTheirSize) {
  const Box chunk({2, 0, 4}, {3, 5, 6});  // 90 elements
  for (const uint64_t max_bytes : {uint64_t{1}, uint64_t{8}, uint64_t{24}, uint64_t{40}, uint64_t{100}, uint64_t{1000}}) {
    SCOPED_TRACE(max_bytes);
    const std::vector<Box> pieces = contiguous_pieces(chunk, 4, max_bytes);
    int64_t next = 0;  // the element each piece must start at
    for (const Box& piece : pieces) {
      ASSERT_TRUE(chunk.contains(piece)) << piece.to_string();
      const std::vector<reshard::Run> runs = contiguous_runs(Box::whole(chunk.shape()), piece.relative_to(chunk));
      ASSERT_EQ(runs.size(), 1u) << piece.to_string();
      EXPECT_EQ(runs[0].offset, next) << piece.to_string();
      EXPECT_LE(static_cast<uint64_t>(piece.volume()) * 4, std::max<uint64_t>(max_bytes, 4)) << piece.to_string();
      next += runs[0].length;
    }
    EXPECT_EQ(next, chunk.volume());
  }
  EXPECT_EQ(contiguous_pieces(Box({}, {}), 8, 4).size(), 1u);  // a scalar is one element
  EXPECT_EQ(contiguous_pieces(chunk, 4, 90 * 4).size(), 1u);
}

TEST(StagingBudget, HoldsNoMoreThanItsBytes) {
  StagingBudget budget(100);
  budget.take(60);
  std::thread writer([&] {
    // Gives only once the take below is waiting (it counts its wait before
    // it sleeps, under the lock the count is read with), however slow the
    // machine: a give before the take would leave it nothing to wait for.
    while (budget.waits() == 0) std::this_thread::yield();
    budget.give(60);
  });
  budget.take(60);  // waits for the give
  writer.join();
  EXPECT_EQ(budget.peak(), 60u);
  EXPECT_EQ(budget.waits(), 1u);
  budget.give(60);
  budget.take(500);  // more than the budget: alone
  EXPECT_EQ(budget.peak(), 500u);
  EXPECT_EQ(piece_bytes_for(64), 16u);
  EXPECT_EQ(piece_bytes_for(uint64_t{1} << 40), uint64_t{64} << 20);
  EXPECT_EQ(piece_bytes_for(2), 1u);
}

}  // namespace
}  // namespace reshard::pipelines_detail
