// run_block_pipeline: blocks in order, the stages really overlapping, the
// first error rethrown with no stage left running; for_row_ranges' split.
#include "pipelines/common/block_pipeline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <latch>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace reshard::pipelines_detail {
namespace {

using namespace std::chrono_literals;

// Each block's input is its index repeated; its output the input plus one.
BlockStages counting_stages(std::vector<int>& written) {
  BlockStages stages;
  stages.read = [](size_t i, BlockBuffer& in) {
    for (std::byte& b : in.resize(i % 7 + 1)) b = static_cast<std::byte>(i);
  };
  stages.transform = [](size_t, std::span<const std::byte> in, BlockBuffer& out) {
    const std::span<std::byte> bytes = out.resize(in.size());
    for (size_t j = 0; j < in.size(); ++j) bytes[j] = static_cast<std::byte>(static_cast<int>(in[j]) + 1);
  };
  stages.write = [&written](size_t i, std::span<const std::byte> out) {
    EXPECT_EQ(out.size(), i % 7 + 1) << "block " << i;
    for (const std::byte b : out) EXPECT_EQ(static_cast<int>(b), static_cast<int>(static_cast<std::byte>(i)) + 1);
    written.push_back(static_cast<int>(i));
  };
  return stages;
}

TEST(BlockPipeline, WritesEveryBlockInOrder) {
  for (const size_t blocks : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{50}}) {
    std::vector<int> written;
    BlockBuffers buffers;
    run_block_pipeline(blocks, counting_stages(written), buffers);
    ASSERT_EQ(written.size(), blocks);
    for (size_t i = 0; i < blocks; ++i) EXPECT_EQ(written[i], static_cast<int>(i));
  }
}

// Two stages that must run at the same time: each waits (bounded) for the
// other to have started. Run one after the other, the first wait times out.
struct Meeting {
  std::promise<void> first, second;
  std::shared_future<void> first_here = first.get_future().share(), second_here = second.get_future().share();
  std::atomic<bool> met{true};

  void arrive_first() {
    first.set_value();
    if (second_here.wait_for(5s) != std::future_status::ready) met = false;
  }
  void arrive_second() {
    second.set_value();
    if (first_here.wait_for(5s) != std::future_status::ready) met = false;
  }
};

TEST(BlockPipeline, ReadsTheNextBlockAndWritesTheLastWhileTransforming) {
  Meeting read_ahead, write_behind;  // read(1) with transform(0); write(0) with transform(1)
  std::vector<int> written;
  BlockStages stages = counting_stages(written);
  const BlockStages plain = stages;
  stages.read = [&](size_t i, BlockBuffer& in) {
    if (i == 1) read_ahead.arrive_second();
    plain.read(i, in);
  };
  stages.transform = [&](size_t i, std::span<const std::byte> in, BlockBuffer& out) {
    if (i == 0) read_ahead.arrive_first();
    if (i == 1) write_behind.arrive_second();
    plain.transform(i, in, out);
  };
  stages.write = [&](size_t i, std::span<const std::byte> out) {
    if (i == 0) write_behind.arrive_first();
    plain.write(i, out);
  };
  BlockBuffers buffers;
  run_block_pipeline(3, stages, buffers);
  EXPECT_TRUE(read_ahead.met) << "block 1 was not read while block 0 was transformed";
  EXPECT_TRUE(write_behind.met) << "block 0 was not written while block 1 was transformed";
  EXPECT_EQ(written, (std::vector<int>{0, 1, 2}));
}

// The stage that runs beside a failing one, which the test holds until the
// failure has been thrown: the pipeline runs transform(i) beside read(i+1)
// and write(i-1), and write(i) beside transform(i+1). Block 0's read runs
// alone: none.
std::optional<std::pair<std::string, size_t>> partner_of(const std::string& failing, size_t at, size_t blocks) {
  if (failing == "transform" && at + 1 < blocks) return std::pair<std::string, size_t>{"read", at + 1};
  if (failing == "read" && at > 0) return std::pair<std::string, size_t>{"transform", at - 1};
  if (failing == "write" && at + 1 < blocks) return std::pair<std::string, size_t>{"transform", at + 1};
  return std::nullopt;
}

// A failing stage: its error comes out, once no stage is running any more.
// The failure is thrown while another stage is provably still running (it
// started, and waits for the throw), whatever the threads' scheduling.
TEST(BlockPipeline, TheFirstErrorComesOutOnceEveryStageHasEnded) {
  constexpr size_t kBlocks = 8;
  for (const std::string failing : {"read", "transform", "write"}) {
    for (const size_t at : {size_t{0}, size_t{1}, size_t{4}}) {
      SCOPED_TRACE(failing + " of block " + std::to_string(at));
      std::atomic<int> running{0};
      std::vector<int> written;
      BlockStages stages = counting_stages(written);
      const BlockStages plain = stages;
      const auto partner = partner_of(failing, at, kBlocks);
      std::latch partner_started(partner ? 1 : 0);
      std::latch thrown(1);
      // Each stage counts itself running; the partner stays so until the throw.
      const auto run = [&](const std::string& stage, size_t i, const std::function<void()>& body) {
        ++running;
        if (partner && partner->first == stage && partner->second == i) {
          partner_started.count_down();
          thrown.wait();
        }
        body();
        --running;
        if (stage == failing && i == at) {
          partner_started.wait();
          thrown.count_down();
          throw std::runtime_error(stage + " failed");
        }
      };
      stages.read = [&](size_t i, BlockBuffer& in) { run("read", i, [&] { plain.read(i, in); }); };
      stages.transform = [&](size_t i, std::span<const std::byte> in, BlockBuffer& out) {
        run("transform", i, [&] { plain.transform(i, in, out); });
      };
      stages.write = [&](size_t i, std::span<const std::byte> out) {
        // A failing write writes nothing.
        run("write", i, [&] {
          if (!(failing == "write" && i == at)) plain.write(i, out);
        });
      };
      try {
        BlockBuffers buffers;
        run_block_pipeline(kBlocks, stages, buffers);
        ADD_FAILURE() << "no error";
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), failing + " failed");
      }
      EXPECT_EQ(running.load(), 0);
      EXPECT_LE(written.size(), at);
    }
  }
}

TEST(BlockBuffer, KeepsItsBytesWhenResizedWithinItsCapacity) {
  BlockBuffer buffer;
  EXPECT_TRUE(buffer.bytes().empty());
  const std::span<std::byte> first = buffer.resize(100);
  for (size_t i = 0; i < first.size(); ++i) first[i] = static_cast<std::byte>(i);
  EXPECT_EQ(buffer.resize(10).data(), first.data());  // no new allocation
  const std::span<std::byte> again = buffer.resize(100);
  EXPECT_EQ(again.data(), first.data());
  for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(again[i], static_cast<std::byte>(i));
  EXPECT_EQ(buffer.resize(1000).size(), 1000u);
}

TEST(ForRowRanges, CoversEveryRowOnceInRangesOfAtLeastTheMinimum) {
  struct Case {
    int64_t rows;
    int threads;
    int64_t min_rows;
    size_t parts;
  };
  for (const Case& c : {Case{10, 3, 1, 3}, Case{10, 3, 4, 2}, Case{10, 3, 20, 1}, Case{2, 8, 1, 2},
                        Case{7, 0, 1, 1}, Case{0, 4, 1, 0}}) {
    std::mutex mutex;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for_row_ranges(c.rows, c.threads, c.min_rows, [&](int64_t begin, int64_t end) {
      std::lock_guard lock(mutex);
      ranges.emplace_back(begin, end);
    });
    std::sort(ranges.begin(), ranges.end());
    EXPECT_EQ(ranges.size(), c.parts) << c.rows << " rows, " << c.threads << " threads";
    int64_t next = 0;
    for (const auto& [begin, end] : ranges) {
      EXPECT_EQ(begin, next);
      EXPECT_GT(end, begin);
      if (ranges.size() > 1) {
        EXPECT_GE(end - begin, c.min_rows);
      }
      next = end;
    }
    EXPECT_EQ(next, c.rows);
  }
  EXPECT_THROW(for_row_ranges(100, 4, 1, [](int64_t begin, int64_t) {
                 if (begin > 0) throw std::runtime_error("a helper failed");
               }),
               std::runtime_error);
}

}  // namespace
}  // namespace reshard::pipelines_detail
